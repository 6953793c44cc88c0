//! Unique hash indexes from the client's side: a [`UniqueIndex`] handle
//! (the table, the index's hidden table, its columns) that reads, updates
//! and deletes by unique key go through ([`Transaction::read_unique`],
//! [`Transaction::update_unique`], [`Transaction::delete_unique`]), and
//! the online build of an index created on a table that holds rows
//! ([`Cluster::create_unique_index`]).
//!
//! An operation by unique key is one `KeyOp` with `OP_BY_UNIQUE_KEY`: its
//! `table` is the hidden table, its `key` the unique values encoded as the
//! hidden table's primary key, its `version` and `attrs` the table's. The
//! coordinator looks the entry up and runs the operation on the row it
//! names, in one request.
//!
//! The build: mgmd creates the hidden table and lists the index as
//! building, and answers once every data node keeps the index with every
//! write that begins from then on. The client then scans the table
//! (committed read) and, a batch of rows per transaction, locks each row
//! (shared), inserts its entry (unique values → encoded primary key), and
//! where an entry is there already reads it: naming this row, a write made
//! it meanwhile; naming another, the rows break the index, and the build
//! fails (the index is dropped). A row changed after its batch committed
//! keeps its entry right through the data nodes' maintenance; one changed
//! before its batch locked it is read as it is then. So when the scan
//! ends, every row has exactly its entry, and mgmd is told the index is
//! built.
//!
//! Writes to a table with unique indexes carry their index operations in
//! the same transaction: each counts against the data nodes'
//! `max_operations_per_transaction` (an insert one more, an update that
//! changes an indexed value two more), and a clash fails the transaction
//! with 630 even for an operation sent with ignore-error (the flag covers
//! the row's own key, not another row's value).
//!
//! [`Transaction::read_unique`]: crate::Transaction::read_unique
//! [`Transaction::update_unique`]: crate::Transaction::update_unique
//! [`Transaction::delete_unique`]: crate::Transaction::delete_unique
//! [`Cluster::create_unique_index`]: crate::Cluster::create_unique_index

use crate::cluster::Cluster;
use crate::error::bad_request;
use crate::record::{Record, Table};
use crate::transaction::OpId;
use shoal_types::value::decode_value;
use shoal_types::{ErrorClass, ErrorCode, SchemaVersion, ShoalError, UniqueIndexDef, Value};
use shoal_wire::{ExecType, KeyOp, LockMode, OpType, OP_BY_UNIQUE_KEY};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Rows one build transaction fills the index for, at most (and the
/// build's scan rounds).
pub const BUILD_BATCH_ROWS: usize = 256;
/// Times a build batch is tried again after a temporary error (a lock
/// wait timed out against a writer, a node failed) before the build fails.
pub const BUILD_BATCH_RETRIES: u32 = 10;
/// Times the build's scan of the table is started again after it failed
/// with a temporary error (entries already made are found again, naming
/// their rows).
pub const BUILD_SCAN_RESTARTS: u32 = 5;
/// The first wait before a retry; it doubles up to [`BUILD_BACKOFF_MAX`].
const BUILD_BACKOFF_FIRST: Duration = Duration::from_millis(10);
const BUILD_BACKOFF_MAX: Duration = Duration::from_millis(1000);
/// The build logs its progress every this many rows.
const BUILD_PROGRESS_ROWS: u64 = 100_000;

/// A unique index of a table, for operations by unique key. Cheap to
/// clone. Get one from [`Cluster::unique_index`].
#[derive(Clone)]
pub struct UniqueIndex {
    inner: Arc<Inner>,
}

struct Inner {
    table: Table,
    /// The hidden table: keyed by the index columns, holding each row's
    /// encoded primary key.
    hidden: Table,
    def: UniqueIndexDef,
}

impl fmt::Debug for UniqueIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UniqueIndex")
            .field("table", &self.table().name())
            .field("name", &self.name())
            .field("columns", &self.column_names())
            .field("building", &self.is_building())
            .finish()
    }
}

impl UniqueIndex {
    /// The index `name` of `table`, with its hidden table `hidden`.
    pub(crate) fn new(table: Table, hidden: Table, name: &str) -> Result<UniqueIndex, ShoalError> {
        let def = table
            .def()
            .unique_index(name)
            .cloned()
            .ok_or_else(|| no_such_index(&table, name))?;
        let fits = hidden.id() == def.table
            && hidden.def().options.index_of == Some(table.id())
            && hidden.def().primary_key.len() == def.columns.len();
        if !fits {
            return Err(ShoalError::with_detail(
                ErrorCode::ClusterFailure,
                format!(
                    "mgmd served table {:?} (id {}) as the hidden table of unique index {name:?} of table {:?}, which names table id {}",
                    hidden.name(),
                    hidden.id(),
                    table.name(),
                    def.table
                ),
            ));
        }
        Ok(UniqueIndex {
            inner: Arc::new(Inner { table, hidden, def }),
        })
    }

    /// The index's name.
    pub fn name(&self) -> &str {
        &self.inner.def.name
    }

    /// The indexed table.
    pub fn table(&self) -> &Table {
        &self.inner.table
    }

    /// The index's hidden table (its key: the index columns; then the
    /// row's encoded primary key). Clients read it only through the index.
    pub fn index_table(&self) -> &Table {
        &self.inner.hidden
    }

    /// The index's columns (ids in the table), in key order.
    pub fn columns(&self) -> &[u16] {
        &self.inner.def.columns
    }

    /// The index's column names, in key order.
    pub fn column_names(&self) -> Vec<&str> {
        let def = self.table().def();
        self.columns()
            .iter()
            .map(|&c| def.columns[usize::from(c)].name.as_str())
            .collect()
    }

    /// Whether the index was still being built when this handle was made
    /// (operations through it are then refused).
    pub fn is_building(&self) -> bool {
        self.inner.def.building
    }

    /// Refuses a record or table other than the index's table.
    pub(crate) fn check_table(&self, table: &Table) -> Result<(), ShoalError> {
        if table.id() != self.table().id() {
            return Err(bad_request(format!(
                "unique index {:?} belongs to table {:?}, not to table {:?}",
                self.name(),
                self.table().name(),
                table.name()
            )));
        }
        Ok(())
    }

    /// `key` (one value per index column, in key order) encoded as the
    /// hidden table's primary key. A NULL is refused: no row has an entry
    /// with one.
    pub(crate) fn encode_key(&self, key: &[Value]) -> Result<Vec<u8>, ShoalError> {
        let names = self.column_names();
        if key.len() != names.len() {
            return Err(bad_request(format!(
                "unique index {:?} of table {:?} has {} column(s) ({}), got {} value(s)",
                self.name(),
                self.table().name(),
                names.len(),
                names.join(", "),
                key.len()
            )));
        }
        if let Some(i) = key.iter().position(Value::is_null) {
            return Err(ShoalError::with_detail(
                ErrorCode::IllegalNull,
                format!(
                    "unique key column {:?} of index {:?} cannot be NULL (rows with NULL there have no entry: reach them by primary key or a scan)",
                    names[i],
                    self.name()
                ),
            ));
        }
        let mut out = Vec::with_capacity(16);
        self.index_table().layout().encode_key(key, &mut out)?;
        Ok(out)
    }

    /// A `KeyOp` by unique key.
    pub(crate) fn key_op(
        &self,
        op: OpType,
        lock: LockMode,
        key: &[Value],
        attrs: Vec<u8>,
        version: SchemaVersion,
    ) -> Result<KeyOp, ShoalError> {
        Ok(KeyOp::new(
            op,
            lock,
            OP_BY_UNIQUE_KEY,
            self.index_table().id(),
            version,
            &self.encode_key(key)?,
            &attrs,
        ))
    }

    /// A delete by unique key.
    pub(crate) fn encode_delete(&self, key: &[Value]) -> Result<KeyOp, ShoalError> {
        self.key_op(
            OpType::Delete,
            LockMode::Exclusive,
            key,
            Vec::new(),
            self.table().version(),
        )
    }
}

/// "No such unique index", listing the ones the table has.
pub(crate) fn no_such_index(table: &Table, name: &str) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::NoSuchColumn,
        format!(
            "table {:?} has no unique index {name:?} (it has {:?}; an index added since this client read the table shows after Cluster::invalidate_table)",
            table.name(),
            table
                .def()
                .unique_indexes
                .iter()
                .map(|u| u.name.as_str())
                .collect::<Vec<_>>()
        ),
    )
}

/// Whether an error of a build batch is worth another try: temporary
/// (a lock wait against a writer, a node failure), or a commit whose
/// outcome is unknown (the batch is idempotent: its entries, if they
/// went in, are found again naming their rows).
fn retryable(e: &ShoalError) -> bool {
    matches!(e.class(), ErrorClass::Temporary | ErrorClass::UnknownResult)
}

/// Waits before try `attempt` (1, 2, ...).
async fn backoff(attempt: u32) {
    let wait = BUILD_BACKOFF_FIRST
        .saturating_mul(1 << attempt.min(16))
        .min(BUILD_BACKOFF_MAX);
    tokio::time::sleep(wait).await;
}

/// What the build needs, worked out once.
struct Plan {
    index: UniqueIndex,
    /// The primary key's column names (the scan returns them).
    key_names: Vec<String>,
    /// A record of the table's primary key, then the index columns not in
    /// it: a batch reads each row through it.
    row_record: Record,
    /// Where each index column sits in `row_record`.
    unique_positions: Vec<usize>,
    /// The hidden table's full record: the index columns, then the
    /// encoded primary key.
    entry_record: Record,
}

/// Fills `index` (building) from every row of its table; returns the
/// entries made or found. Fails with 630 naming both rows if two rows
/// hold the same values.
pub(crate) async fn build(cluster: &Cluster, index: &UniqueIndex) -> Result<u64, ShoalError> {
    let table = index.table();
    let def = table.def();
    let key_names: Vec<String> = def
        .primary_key
        .iter()
        .map(|&k| def.columns[usize::from(k)].name.clone())
        .collect();
    let mut read_columns = def.primary_key.clone();
    for &c in index.columns() {
        if !read_columns.contains(&c) {
            read_columns.push(c);
        }
    }
    let read_names: Vec<&str> = read_columns
        .iter()
        .map(|&c| def.columns[usize::from(c)].name.as_str())
        .collect();
    let unique_positions = index
        .columns()
        .iter()
        .map(|c| read_columns.iter().position(|r| r == c).expect("listed"))
        .collect();
    let plan = Plan {
        index: index.clone(),
        row_record: table.record(&read_names)?,
        key_names,
        unique_positions,
        entry_record: index.index_table().full_record(),
    };
    let mut restarts = 0;
    let mut rows: u64 = 0;
    let mut entries: u64 = 0;
    'scan: loop {
        let names: Vec<&str> = plan.key_names.iter().map(String::as_str).collect();
        let opened = cluster
            .transaction()
            .scan(table)
            .columns(&names)
            .batch(
                BUILD_BATCH_ROWS as u32,
                crate::scan::SCAN_BATCH_BYTES_DEFAULT,
            )
            .open()
            .await;
        let mut scan = match opened {
            Ok(s) => s,
            Err(e) if retryable(&e) && restarts < BUILD_SCAN_RESTARTS => {
                restarts += 1;
                tracing::info!(
                    "unique index build of {:?}: the scan failed ({e}); starting it again",
                    index.name()
                );
                backoff(restarts).await;
                continue 'scan;
            }
            Err(e) => return Err(e),
        };
        loop {
            let mut keys: Vec<Vec<Value>> = Vec::with_capacity(BUILD_BATCH_ROWS);
            let mut scan_error = None;
            let mut ended = false;
            while keys.len() < BUILD_BATCH_ROWS {
                match scan.next_row().await {
                    Ok(Some(row)) => keys.push(row.values().into_iter().map(|(_, v)| v).collect()),
                    Ok(None) => {
                        ended = true;
                        break;
                    }
                    Err(e) => {
                        scan_error = Some(e);
                        break;
                    }
                }
            }
            if !keys.is_empty() {
                entries += fill_batch_retrying(cluster, &plan, &keys).await?;
                let before = rows;
                rows += keys.len() as u64;
                if before / BUILD_PROGRESS_ROWS != rows / BUILD_PROGRESS_ROWS {
                    tracing::info!(
                        "unique index build of {:?} of table {:?}: {rows} rows done, {entries} entries",
                        index.name(),
                        table.name()
                    );
                }
            }
            match scan_error {
                Some(e) if retryable(&e) && restarts < BUILD_SCAN_RESTARTS => {
                    restarts += 1;
                    tracing::info!(
                        "unique index build of {:?}: the scan failed after {rows} rows ({e}); starting it again",
                        index.name()
                    );
                    backoff(restarts).await;
                    continue 'scan;
                }
                Some(e) => return Err(e),
                None if ended => return Ok(entries),
                None => {}
            }
        }
    }
}

/// [`fill_batch`] tried again after temporary errors.
async fn fill_batch_retrying(
    cluster: &Cluster,
    plan: &Plan,
    keys: &[Vec<Value>],
) -> Result<u64, ShoalError> {
    let mut attempt = 0;
    loop {
        match fill_batch(cluster, plan, keys).await {
            Ok(Some(n)) => return Ok(n),
            // An entry went away between its insert and its read: again.
            Ok(None) if attempt < BUILD_BATCH_RETRIES => {}
            Ok(None) => {
                return Err(ShoalError::with_detail(
                    ErrorCode::DeadlockTimeout,
                    format!(
                        "unique index build of {:?}: entries kept changing under {BUILD_BATCH_RETRIES} tries of a batch",
                        plan.index.name()
                    ),
                ))
            }
            Err(e) if retryable(&e) && attempt < BUILD_BATCH_RETRIES => {
                tracing::debug!(
                    "unique index build of {:?}: batch try {attempt} failed ({e}); again",
                    plan.index.name()
                );
            }
            Err(e) => return Err(e),
        }
        attempt += 1;
        backoff(attempt).await;
    }
}

/// One batch in one transaction: locks the rows of `keys`, inserts their
/// entries, checks the entries that were there already, commits.
/// `Ok(None)`: try again (an entry vanished meanwhile).
async fn fill_batch(
    cluster: &Cluster,
    plan: &Plan,
    keys: &[Vec<Value>],
) -> Result<Option<u64>, ShoalError> {
    let table = plan.index.table();
    let mut tx = cluster.transaction();
    let mut reads: Vec<OpId> = Vec::with_capacity(keys.len());
    for key in keys {
        let op = tx.read(&plan.row_record, key, LockMode::Shared)?;
        // Deleted since the scan saw it: no entry to make.
        tx.ignore_error(op);
        reads.push(op);
    }
    tx.execute(ExecType::NoCommit).await?;
    // (unique values, encoded primary key, insert)
    let mut entries: Vec<(Vec<Value>, Vec<u8>, OpId)> = Vec::with_capacity(keys.len());
    for (key, &op) in keys.iter().zip(&reads) {
        if let Some(e) = tx.op_error(op) {
            if e.code == ErrorCode::TupleNotFound {
                continue;
            }
            return Err(e.clone());
        }
        let Some(row) = tx.row(op) else {
            continue;
        };
        let mut values: Vec<Value> = row.values().into_iter().map(|(_, v)| v).collect();
        let unique: Vec<Value> = plan
            .unique_positions
            .iter()
            .map(|&p| std::mem::replace(&mut values[p], Value::Null))
            .collect();
        // SQL: NULLs are never equal, a row with one has no entry.
        if unique.iter().any(Value::is_null) {
            continue;
        }
        let mut pk = Vec::with_capacity(16);
        table.layout().encode_key(key, &mut pk)?;
        let mut entry = unique.clone();
        entry.push(Value::Bytes(pk.clone()));
        let insert = tx.insert(&plan.entry_record, &entry)?;
        tx.ignore_error(insert);
        entries.push((unique, pk, insert));
    }
    if !entries.is_empty() {
        tx.execute(ExecType::NoCommit).await?;
    }
    // Entries there already: made by a write meanwhile (naming this row),
    // or another row's (a duplicate).
    let mut checks: Vec<(usize, OpId)> = Vec::new();
    for (i, (unique, _, insert)) in entries.iter().enumerate() {
        match tx.op_error(*insert) {
            None => {}
            Some(e) if e.code == ErrorCode::TupleAlreadyExists => {
                let read = tx.read(&plan.entry_record, unique, LockMode::Shared)?;
                tx.ignore_error(read);
                checks.push((i, read));
            }
            Some(e) => return Err(e.clone()),
        }
    }
    if !checks.is_empty() {
        tx.execute(ExecType::NoCommit).await?;
        let pk_column = plan.index.columns().len() as u16;
        for &(i, read) in &checks {
            let (unique, pk, _) = &entries[i];
            if let Some(e) = tx.op_error(read) {
                if e.code == ErrorCode::TupleNotFound {
                    return Ok(None);
                }
                return Err(e.clone());
            }
            let Some(row) = tx.row(read) else {
                return Ok(None);
            };
            let holder = row.get_raw(pk_column)?.unwrap_or_default();
            if holder != &pk[..] {
                let other = holder.to_vec();
                let _ = tx.execute(ExecType::Rollback).await;
                return Err(duplicate(&plan.index, unique, pk, &other));
            }
        }
    }
    tx.execute(ExecType::Commit).await?;
    Ok(Some(entries.len() as u64))
}

/// The error of a build that found two rows with the same unique values.
fn duplicate(index: &UniqueIndex, unique: &[Value], pk: &[u8], other: &[u8]) -> ShoalError {
    let table = index.table();
    let show_key = |bytes: &[u8]| -> String {
        let mut parts = Vec::new();
        let def = table.def();
        let split = table.layout().split_key(bytes, |c, b| {
            let v = decode_value(def.columns[usize::from(c)].ty, b);
            parts.push(format!(
                "{} = {}",
                def.columns[usize::from(c)].name,
                show(&v)
            ));
        });
        match split {
            Ok(()) => format!("({})", parts.join(", ")),
            Err(_) => format!("(undecodable key {bytes:02x?})"),
        }
    };
    let values: Vec<String> = index
        .column_names()
        .iter()
        .zip(unique)
        .map(|(n, v)| format!("{n} = {}", show(v)))
        .collect();
    ShoalError::with_detail(
        ErrorCode::TupleAlreadyExists,
        format!(
            "unique index {:?} of table {:?} cannot be built: the rows with primary key {} and {} both hold ({}); the index was dropped",
            index.name(),
            table.name(),
            show_key(other),
            show_key(pk),
            values.join(", ")
        ),
    )
}

/// A value for a message: text quoted, numbers plain.
fn show(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Int(x) => x.to_string(),
        Value::UInt(x) => x.to_string(),
        Value::Float(x) => x.to_string(),
        Value::Double(x) => x.to_string(),
        Value::Str(s) => format!("{s:?}"),
        Value::Bytes(b) => format!(
            "0x{}",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
        Value::Timestamp(t) => t.to_string(),
        Value::DateTime(t) => t.to_string(),
        Value::Date(d) => shoal_types::temporal::format_date(*d),
        Value::Time(t) => shoal_types::temporal::format_time(*t),
        Value::Decimal(d) => d.to_string(),
    }
}

/// Drops the index being built if the build's future is dropped before
/// it finished (the caller gave up on it), so no index stays building.
pub(crate) struct AbandonGuard {
    cluster: Option<Cluster>,
    table: String,
    index: String,
    /// The index's hidden table: only this index is dropped.
    index_table: shoal_types::TableId,
}

impl AbandonGuard {
    pub(crate) fn new(
        cluster: &Cluster,
        table: &str,
        index: &str,
        index_table: shoal_types::TableId,
    ) -> AbandonGuard {
        AbandonGuard {
            cluster: Some(cluster.clone()),
            table: table.to_string(),
            index: index.to_string(),
            index_table,
        }
    }

    /// The build ended (either way) under the caller's eyes.
    pub(crate) fn disarm(mut self) {
        self.cluster = None;
    }
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        let Some(cluster) = self.cluster.take() else {
            return;
        };
        let (table, index, index_table) = (
            std::mem::take(&mut self.table),
            std::mem::take(&mut self.index),
            self.index_table,
        );
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    tracing::warn!("unique index build of {index:?} of table {table:?} abandoned; dropping the index");
                    if let Err(e) = cluster.drop_index_if(&table, &index, Some(index_table)).await {
                        tracing::warn!("dropping abandoned unique index {index:?} of table {table:?}: {e}");
                    }
                });
            }
            // No runtime: mgmd drops it when this client's session closes.
            Err(_) => tracing::warn!(
                "unique index build of {index:?} of table {table:?} abandoned outside a runtime; mgmd drops it when the cluster handle closes"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::table;
    use shoal_types::{SchemaVersion, TableId};

    /// `t` of `record::tests` with unique index `by_name_a` on (name, a),
    /// and its hidden table.
    fn index() -> UniqueIndex {
        let base = table()
            .def()
            .clone()
            .with_unique_index("by_name_a", &["name", "a"])
            .unwrap();
        let mut hidden = base.unique_indexes[0].table_def(&base).unwrap();
        hidden.id = TableId(9);
        hidden.version = SchemaVersion(1);
        let mut base = base;
        base.unique_indexes[0].table = TableId(9);
        UniqueIndex::new(Table::new(base), Table::new(hidden), "by_name_a").unwrap()
    }

    #[test]
    fn operations_by_unique_key_name_the_hidden_table_and_carry_the_tables_version() {
        let ix = index();
        assert_eq!(ix.column_names(), vec!["name", "a"]);
        let key = [Value::from("ab"), Value::Int(-1)];
        let mut want_key = Vec::new();
        ix.index_table()
            .layout()
            .encode_key(&key, &mut want_key)
            .unwrap();
        let rec = ix.table().record(&["n", "name"]).unwrap();

        let read = rec.encode_read_unique(&ix, &key, LockMode::Shared).unwrap();
        assert_eq!(read.op, OpType::Read);
        assert_eq!(read.flags, OP_BY_UNIQUE_KEY);
        assert_eq!(read.table, TableId(9));
        assert_eq!(read.version, SchemaVersion(3), "the table's version");
        assert_eq!(read.key(), want_key);
        assert_eq!(read.attrs(), vec![2, 0, 4, 0, 2, 0]);

        let update = rec
            .encode_update_unique(&ix, &key, &[Value::Int(7), Value::Null])
            .unwrap();
        assert_eq!(
            (update.op, update.flags),
            (OpType::Update, OP_BY_UNIQUE_KEY)
        );
        assert_eq!(update.key(), want_key);
        let (attrs, _) = shoal_types::layout::AttrSlice::parse(update.attrs()).unwrap();
        assert_eq!(attrs.iter().map(|(c, _)| c).collect::<Vec<_>>(), vec![4, 2]);

        let delete = ix.encode_delete(&key).unwrap();
        assert_eq!(
            (delete.op, delete.flags, delete.table),
            (OpType::Delete, OP_BY_UNIQUE_KEY, TableId(9))
        );
        assert!(delete.attrs().is_empty());
    }

    #[test]
    fn bad_unique_keys_and_records_are_refused_before_sending() {
        let ix = index();
        let code = |r: Result<KeyOp, ShoalError>| r.unwrap_err().code;
        let e = ix
            .encode_delete(&[Value::from("ab"), Value::Null])
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::IllegalNull);
        assert!(e.detail.contains("\"a\""), "{e}");
        assert_eq!(
            code(ix.encode_delete(&[Value::from("ab")])),
            ErrorCode::BadRequest
        );
        assert_eq!(
            code(ix.encode_delete(&[Value::from("too long"), Value::Int(1)])),
            ErrorCode::ValueTooLong
        );
        // A record holding key columns cannot update by unique key.
        let with_key = ix.table().record(&["k1", "n"]).unwrap();
        let e = with_key
            .encode_update_unique(
                &ix,
                &[Value::from("a"), Value::Int(1)],
                &[Value::UInt(1), Value::Int(1)],
            )
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest);
        assert!(e.detail.contains("\"k1\""), "{e}");
        // Another table's record.
        let mut other = table().def().clone();
        other.id = TableId(99);
        let other = Table::new(other).record(&["n"]).unwrap();
        assert_eq!(
            code(other.encode_read_unique(
                &ix,
                &[Value::from("a"), Value::Int(1)],
                LockMode::Shared
            )),
            ErrorCode::BadRequest
        );
    }

    #[test]
    fn a_duplicate_names_both_rows_and_the_values() {
        let ix = index();
        let key = |k1: u64, k2: &str| {
            let mut out = Vec::new();
            ix.table()
                .layout()
                .encode_key(&[Value::UInt(k1), Value::from(k2)], &mut out)
                .unwrap();
            out
        };
        let e = duplicate(
            &ix,
            &[Value::from("ab"), Value::Int(3)],
            &key(1, "x"),
            &key(2, "y"),
        );
        assert_eq!(e.code, ErrorCode::TupleAlreadyExists);
        for part in [
            "\"by_name_a\"",
            "(k1 = 2, k2 = \"y\")",
            "(k1 = 1, k2 = \"x\")",
            "(name = \"ab\", a = 3)",
        ] {
            assert!(e.detail.contains(part), "{part}: {e}");
        }
    }
}
