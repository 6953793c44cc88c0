//! Statement execution: each statement is split off the query string and
//! parsed ([`split`]), its expressions compiled ([`expr`]), its access to
//! a table planned ([`plan`]) and run through the native client only:
//! [`select`] reads, [`insert`] and [`dml`] write, [`ddl`] changes the schema through
//! mgmd, [`show`] and [`information_schema`] answer the questions tools
//! ask; [`warnings`] collects the conditions a statement raises.
//!
//! Invariants: executors never commit or roll back the transaction they
//! are handed (the session does, by its autocommit rules); they execute
//! their operations with `NoCommit`, so a failure leaves the decision to
//! the session; every row a statement reads or writes is bounded (key
//! lookups per statement, result bytes, operations per transaction on the
//! data nodes).

pub mod aggregate;
pub mod auto_increment;
pub mod ddl;
pub mod dialect;
pub mod dml;
pub mod error;
pub mod eval;
pub mod eval_funcs;
pub mod eval_types;
pub mod explain;
pub mod expr;
pub mod expr_funcs;
pub mod fetch;
pub mod group;
pub mod group_key;
pub mod index_ddl;
pub mod information_schema;
pub mod insert;
pub mod item_name;
pub mod join;
pub mod join_names;
pub mod join_select;
pub mod plan;
pub mod projection;
pub mod result_type;
pub mod select;
pub mod show;
pub mod split;
pub mod subquery;
pub mod template;
pub mod union;
pub mod unique_ignore;
pub mod upsert;
pub mod users;
pub mod warnings;

use crate::outcome::SqlError;
use shoal_types::Value;
use std::collections::{BTreeMap, HashMap};

/// Limits of one statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of a result set (text values) built whole before it is sent:
    /// a grouping's, a join's, a UNION's, SHOW's and information_schema's.
    /// Past it the statement fails (1038). A plain SELECT streams its rows
    /// to the client as it reads them and is not bounded by it.
    pub result_bytes_max: usize,
    /// Rows a sort or an UPDATE / DELETE may hold at once; also the
    /// groups and DISTINCT values a grouping holds together. (A SELECT
    /// whose rows come in the order it asks streams them, holding none.)
    pub rows_max: usize,
    /// Bytes of groups and DISTINCT values (keys, held rows, aggregate
    /// states) a grouping may hold. Past it, or past `rows_max` of them,
    /// the statement fails (1038).
    pub group_bytes_max: usize,
    /// Key lookups a statement plans (`IN` lists, combinations of them)
    /// before it scans instead.
    pub key_lookups_max: usize,
    /// Operations sent per round trip (inserts, key reads, updates).
    pub batch_ops_max: usize,
    /// Tables one SELECT may join (MySQL's limit).
    pub join_tables_max: usize,
    /// Bytes of rows a statement holds in memory at once (as values, a
    /// few times their text): what it read to sort, join, insert
    /// elsewhere or use as a subquery's result.
    pub held_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            result_bytes_max: 64 << 20,
            rows_max: 1_000_000,
            group_bytes_max: 64 << 20,
            key_lookups_max: 1024,
            batch_ops_max: 256,
            join_tables_max: 61,
            held_bytes_max: 256 << 20,
        }
    }
}

impl Limits {
    /// The default limits with `bytes` for what a statement holds as rows
    /// (`held_bytes_max`), and a quarter of it for a grouping's state and
    /// a result built whole (`shoal sql --query-memory-mb`).
    pub fn with_query_memory(bytes: usize) -> Limits {
        Limits {
            held_bytes_max: bytes,
            group_bytes_max: bytes / 4,
            result_bytes_max: bytes / 4,
            ..Limits::default()
        }
    }
}

/// A result's rows in the text protocol's form, bounded by
/// `Limits.result_bytes_max` (an error past it).
pub struct TextRows {
    rows: Vec<Vec<Option<Vec<u8>>>>,
    bytes: usize,
    bytes_max: usize,
}

impl TextRows {
    pub fn new(limits: &Limits) -> TextRows {
        TextRows {
            rows: Vec::new(),
            bytes: 0,
            bytes_max: limits.result_bytes_max,
        }
    }

    /// Adds a row of values as their text (NULL: `None`).
    pub fn push(&mut self, values: &[Value]) -> Result<(), SqlError> {
        let texts: Vec<Option<Vec<u8>>> = values.iter().map(crate::sqltypes::text).collect();
        self.bytes += texts
            .iter()
            .map(|t| t.as_ref().map_or(1, |b| b.len() + 1))
            .sum::<usize>();
        if self.bytes > self.bytes_max {
            return Err(result_too_large(self.bytes_max));
        }
        self.rows.push(texts);
        Ok(())
    }

    pub fn into_rows(self) -> Vec<Vec<Option<Vec<u8>>>> {
        self.rows
    }
}

/// 1038 past `Limits.held_bytes_max`.
pub fn held_too_much(limit: usize) -> SqlError {
    SqlError::new(
        1038,
        "HY001",
        format!(
            "Out of memory: the statement would hold more than {limit} bytes of rows in the SQL node; narrow it with WHERE or LIMIT"
        ),
    )
}

pub fn too_many_rows(limit: usize, what: &str) -> SqlError {
    SqlError::new(
        1038,
        "HY001",
        format!(
            "Out of memory for {what}: more than {limit} rows (the SQL node buffers them; narrow the statement with WHERE or LIMIT)"
        ),
    )
}

pub fn result_too_large(limit: usize) -> SqlError {
    SqlError::new(
        1038,
        "HY001",
        format!(
            "Result larger than the SQL node's limit of {limit} bytes for a result built whole (grouping, joins, UNION, SHOW); narrow it with WHERE or LIMIT"
        ),
    )
}

/// What expressions may ask of the session: its database, user and
/// variables, folded into constants when a statement compiles.
#[derive(Clone)]
pub struct Env<'a> {
    pub database: Option<&'a str>,
    pub user: &'a str,
    pub host: &'a str,
    pub connection_id: u32,
    /// System variables, by lower-case name.
    pub variables: &'a BTreeMap<String, Value>,
    /// User variables (`@x`), by lower-case name.
    pub user_variables: &'a HashMap<String, Value>,
    pub last_insert_id: u64,
    /// The statement's `NOW()`, in seconds since 1970 UTC.
    pub now_secs: i64,
    pub limits: Limits,
    /// The statement runs in a transaction of its own (autocommit): its
    /// last batch of operations may commit it, saving a round trip; the
    /// session commits only a transaction still open.
    pub own_transaction: bool,
    /// The statement is only described (a prepare): `?` parameters
    /// compile as NULL.
    pub describe_only: bool,
    /// `@@warning_count` and `@@error_count`: the session's list of the
    /// last statement's conditions ([`warnings`]).
    pub warning_count: u64,
    pub error_count: u64,
    /// The results of the statement's subqueries, run before it compiles
    /// ([`subquery`]).
    pub subqueries: Option<&'a subquery::Materialized>,
}

impl Env<'_> {
    /// How to execute a batch: the last one of a statement in its own
    /// transaction commits.
    pub fn exec_type(&self, last: bool) -> shoal_client::ExecType {
        if last && self.own_transaction {
            shoal_client::ExecType::Commit
        } else {
            shoal_client::ExecType::NoCommit
        }
    }
}

impl Env<'_> {
    /// `@@name` (1193 if the SQL node has no such variable).
    pub fn system_variable(&self, name: &str) -> Result<Value, SqlError> {
        // Read from the session's list, not kept among the variables
        // (SHOW VARIABLES does not list them, as in MySQL).
        if name.eq_ignore_ascii_case("warning_count") {
            return Ok(Value::UInt(self.warning_count));
        }
        if name.eq_ignore_ascii_case("error_count") {
            return Ok(Value::UInt(self.error_count));
        }
        self.variables
            .get(&name.to_ascii_lowercase())
            .cloned()
            .ok_or_else(|| {
                SqlError::new(1193, "HY000", format!("Unknown system variable '{name}'"))
            })
    }

    /// `@name` (NULL until set).
    pub fn user_variable(&self, name: &str) -> Value {
        self.user_variables
            .get(&name.to_ascii_lowercase())
            .cloned()
            .unwrap_or(Value::Null)
    }

    pub fn user_at_host(&self) -> String {
        format!("{}@{}", self.user, self.host)
    }
}
