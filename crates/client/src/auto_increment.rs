//! Cluster-wide AUTO_INCREMENT counters, kept the way NDB keeps them:
//! every table's next value is a row of one hidden, logged system table
//! in the data nodes ([`SEQUENCE_TABLE`], NDB's `SYSTAB_0`), and each
//! [`Cluster`] takes ranges of values from it with a transaction (a read
//! under an exclusive lock, then the row's update), caching what it took
//! and handing values out of the cache without a round trip.
//!
//! Invariants:
//! - Two fetches of the same table's range, from any processes, get
//!   disjoint ranges: each reads the row under an exclusive lock and
//!   writes it past what it took before committing; the first fetch of a
//!   table inserts the row, and a racing second insert fails (630) and
//!   reads again. A value is handed out only after its fetch committed.
//! - The counter only grows, except when its table is truncated
//!   ([`Cluster::reset_auto_increment`]) or dropped: then its row is
//!   deleted, so it starts again at 1. Table ids are never reused (mgmd
//!   counts them up and persists the count), so a new table never meets
//!   an old counter even if a row was left behind by a crash.
//! - No value passes the column type's largest
//!   ([`ColumnType::auto_increment_max`]): past it a fetch fails with
//!   `BadValue` (829) saying the values are exhausted.
//! - The system table is created at the first fetch, by whichever client
//!   comes first (mgmd refuses the second with 721, which then uses the
//!   first's); clients never list it ([`Cluster::tables`]) and refuse it
//!   to callers that name it ([`refuse_reserved`]).
//!
//! As in NDB, values from different clients (SQL nodes) interleave: each
//! hands out its own cached range, so ids are unique but not in insert
//! order across clients. An explicit value raises the counter only when
//! it is at or above what this client has seen of it; one that lands in
//! another client's cached range does not shrink that range, which later
//! hands the value out again (a duplicate-key error if the column is a
//! unique key). Likewise a TRUNCATE restarts the counter, but other
//! clients keep handing out the ranges they cached before it.

use crate::cluster::Cluster;
use crate::record::Table;
use shoal_types::{
    ColumnDef, ColumnType, ErrorClass, ErrorCode, ShoalError, TableDef, TableId, Value,
};
use shoal_wire::{ExecType, LockMode};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The hidden system table of every table's next AUTO_INCREMENT value.
pub const SEQUENCE_TABLE: &str = "$shoal$auto_increment";
/// Its key: the table's id.
const TABLE_ID_COLUMN: &str = "table_id";
/// The value the next fetch starts at.
const NEXT_VALUE_COLUMN: &str = "next_value";
/// Values a fetch takes at least, unless configured otherwise
/// ([`crate::ClusterOptions::auto_increment_prefetch`]): one round trip per
/// this many single-row inserts, and at most this many values skipped per
/// client and table when the client goes away.
pub const PREFETCH_DEFAULT: u64 = 256;
/// Tries of one change of the counter (a racing first insert, a lock
/// wait timeout, a node failure) before its error is returned.
const ATTEMPTS: u32 = 8;
/// Tables whose cached range a client keeps; past it, ranges not in use
/// are forgotten (their values are skipped, never handed out twice).
const CACHED_TABLES_MAX: usize = 4096;

/// What one client holds of one table's counter.
#[derive(Debug, Default)]
struct Cached {
    /// Values taken from the counter and not handed out yet.
    next: u64,
    end: u64,
    /// The highest value the counter was seen at: an explicit value below
    /// it needs no round trip to raise it.
    seen: u64,
}

/// Each table's cached range, per [`Cluster`]. A table's entry is an
/// async mutex, held across a fetch: the sessions of one client wait
/// for its fetch rather than each fetching a range of their own.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    by_table: Mutex<BTreeMap<TableId, Arc<tokio::sync::Mutex<Cached>>>>,
}

impl Counters {
    fn entry(&self, table: TableId) -> Arc<tokio::sync::Mutex<Cached>> {
        let mut map = self.by_table.lock().unwrap_or_else(|e| e.into_inner());
        if !map.contains_key(&table) && map.len() >= CACHED_TABLES_MAX {
            // Forget the ranges nobody is using (tables dropped by other
            // clients, or idle ones): bounded memory, a few values skipped.
            map.retain(|_, c| Arc::strong_count(c) > 1);
        }
        map.entry(table).or_default().clone()
    }

    fn remove(&self, table: TableId) -> Option<Arc<tokio::sync::Mutex<Cached>>> {
        self.by_table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&table)
    }
}

/// Values handed out for one request, in order: one range, or several
/// when the cached range ran out on the way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AutoIncrementValues {
    ranges: Vec<Range<u64>>,
    /// The range values are taken from next.
    at: usize,
}

impl AutoIncrementValues {
    fn push(&mut self, r: Range<u64>) {
        if r.is_empty() {
            return;
        }
        match self.ranges.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => self.ranges.push(r),
        }
    }

    /// The next value to be handed out, if any is left.
    pub fn peek(&self) -> Option<u64> {
        self.ranges.get(self.at).map(|r| r.start)
    }

    /// Values left.
    pub fn len(&self) -> u64 {
        self.ranges[self.at.min(self.ranges.len())..]
            .iter()
            .map(|r| r.end - r.start)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.peek().is_none()
    }

    /// Drops the values up to and including `value` (an explicit value
    /// met on the way: the rows after it get values above it).
    pub fn skip_through(&mut self, value: u64) {
        while let Some(r) = self.ranges.get_mut(self.at) {
            if r.end <= value.saturating_add(1) {
                self.at += 1;
            } else {
                r.start = r.start.max(value + 1);
                return;
            }
        }
    }

    /// The ranges left, in order.
    pub fn ranges(&self) -> &[Range<u64>] {
        &self.ranges[self.at.min(self.ranges.len())..]
    }
}

impl Iterator for AutoIncrementValues {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let r = self.ranges.get_mut(self.at)?;
        let v = r.start;
        r.start += 1;
        if r.is_empty() {
            self.at += 1;
        }
        Some(v)
    }
}

/// A change of one table's counter row, made in one transaction.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// Take `want` values (fewer at the type's end); none past `max`.
    Take { want: u64, max: u64 },
    /// Make the counter at least `above + 1`.
    Raise { above: u64 },
    /// Read it without a lock.
    Peek,
    /// Delete the row: the counter starts again at 1.
    Remove,
}

/// 723 for a caller naming the system table: it is not theirs to use.
pub(crate) fn refuse_reserved(name: &str) -> Result<(), ShoalError> {
    if name == SEQUENCE_TABLE {
        return Err(ShoalError::with_detail(
            ErrorCode::NoSuchTable,
            format!(
                "table `{name}` is reserved: it holds the cluster's AUTO_INCREMENT counters, which only the client's auto_increment calls use"
            ),
        ));
    }
    Ok(())
}

/// What [`Cluster::create_table`] checks of a new table here: not the
/// system table's name, and SQL's rule that an AUTO_INCREMENT column is
/// a key ([`TableDef::check_auto_increment_key`]).
pub(crate) fn check_new_table(def: &TableDef) -> Result<(), ShoalError> {
    if def.name == SEQUENCE_TABLE {
        return Err(ShoalError::with_detail(
            ErrorCode::BadTableDefinition,
            format!("table name `{SEQUENCE_TABLE}` is reserved for the AUTO_INCREMENT counters"),
        ));
    }
    def.check_auto_increment_key()
}

/// The system table's definition (hash-only key: it is only ever read
/// by key).
fn sequence_def() -> Result<TableDef, ShoalError> {
    let mut def = TableDef::new(
        SEQUENCE_TABLE,
        vec![
            ColumnDef::new(TABLE_ID_COLUMN, ColumnType::Int { unsigned: true }),
            ColumnDef::new(NEXT_VALUE_COLUMN, ColumnType::BigInt { unsigned: true }),
        ],
        &[TABLE_ID_COLUMN],
    )?;
    def.options.hash_only_primary_key = true;
    Ok(def)
}

/// Whether `t` is the system table as this client builds it (anyone may
/// have created a table of that name through mgmd directly).
fn check_sequence_table(t: &Table) -> Result<(), ShoalError> {
    let want = sequence_def()?;
    let def = t.def();
    let same = def.primary_key == want.primary_key
        && def.columns.len() == want.columns.len()
        && def
            .columns
            .iter()
            .zip(&want.columns)
            .all(|(a, b)| a.name == b.name && a.ty == b.ty);
    if same {
        Ok(())
    } else {
        Err(ShoalError::with_detail(
            ErrorCode::BadTableDefinition,
            format!(
                "table `{SEQUENCE_TABLE}` exists but is not the AUTO_INCREMENT counters' table this client expects (columns `{TABLE_ID_COLUMN}` INT UNSIGNED, `{NEXT_VALUE_COLUMN}` BIGINT UNSIGNED, keyed by `{TABLE_ID_COLUMN}`); drop it through mgmd"
            ),
        ))
    }
}

/// The AUTO_INCREMENT column's largest value (`BadRequest` if the table
/// has no such column).
fn column_max(table: &Table) -> Result<u64, ShoalError> {
    let def = table.def();
    def.auto_increment_column()
        .and_then(|c| def.columns[usize::from(c)].ty.auto_increment_max())
        .ok_or_else(|| {
            ShoalError::with_detail(
                ErrorCode::BadRequest,
                format!("table `{}` has no AUTO_INCREMENT column", def.name),
            )
        })
}

fn exhausted(table: &str, max: u64) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::BadValue,
        format!(
            "the AUTO_INCREMENT values of table `{table}` are exhausted: the next would pass {max}, the largest its column's type holds (use a wider type, or TRUNCATE the table)"
        ),
    )
}

/// The pause before try `attempt` (1, 2, ...): 10 ms doubling, at most
/// 640 ms; about 1.3 s over every try.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(10 << attempt.min(6))
}

impl Cluster {
    /// Takes `count` values of `table`'s AUTO_INCREMENT counter, shared
    /// by every client of the cluster: from this client's cached range,
    /// and when that runs out from the counter, a range of at least
    /// `ClusterOptions::auto_increment_prefetch` values (or `count`,
    /// if more) in one transaction. Values are consecutive as far as
    /// the cached range allows. Errors: the table has no AUTO_INCREMENT
    /// column (4000); the values would pass the column type's largest
    /// (829, permanent); a temporary error (a node failure) once a few
    /// tries failed: nothing was handed out, try again.
    pub async fn auto_increment_values(
        &self,
        table: &Table,
        count: u64,
    ) -> Result<AutoIncrementValues, ShoalError> {
        let max = column_max(table)?;
        let mut out = AutoIncrementValues::default();
        if count == 0 {
            return Ok(out);
        }
        let entry = self.counters().entry(table.id());
        let mut cached = entry.lock().await;
        let mut missing = count;
        while missing > 0 {
            if cached.next < cached.end {
                let take = missing.min(cached.end - cached.next);
                out.push(cached.next..cached.next + take);
                cached.next += take;
                missing -= take;
                continue;
            }
            let want = missing.max(self.auto_increment_prefetch());
            let (first, end) = self
                .change_counter(table, Change::Take { want, max })
                .await?;
            cached.next = first;
            cached.end = end;
            cached.seen = cached.seen.max(end);
        }
        Ok(out)
    }

    /// Makes sure the values `table`'s counter hands out from now on are
    /// above `value` (an explicit value was inserted): values this client
    /// cached at or below it are skipped, and the counter is raised past
    /// it in one transaction unless it was seen above it already.
    /// Errors as [`Cluster::auto_increment_values`]; a value above the
    /// column type's largest is a `BadValue` (829).
    pub async fn raise_auto_increment(&self, table: &Table, value: u64) -> Result<(), ShoalError> {
        let max = column_max(table)?;
        if value > max {
            return Err(ShoalError::with_detail(
                ErrorCode::BadValue,
                format!(
                    "{value} is above {max}, the largest value of table `{}`'s AUTO_INCREMENT column",
                    table.name()
                ),
            ));
        }
        let entry = self.counters().entry(table.id());
        let mut cached = entry.lock().await;
        if value < cached.end {
            // The counter stands at `end` or above already.
            cached.next = cached.next.max(value + 1);
            return Ok(());
        }
        cached.next = cached.end;
        if value < cached.seen {
            return Ok(());
        }
        let (_, after) = self
            .change_counter(table, Change::Raise { above: value })
            .await?;
        cached.seen = cached.seen.max(after);
        Ok(())
    }

    /// The value `table`'s counter would hand out next: from this
    /// client's cached range, else the counter's (a committed read; 1 if
    /// it was never used). What `SHOW CREATE TABLE` shows as
    /// `AUTO_INCREMENT=n`.
    pub async fn auto_increment_next(&self, table: &Table) -> Result<u64, ShoalError> {
        column_max(table)?;
        let entry = self.counters().entry(table.id());
        let cached = entry.lock().await;
        if cached.next < cached.end {
            return Ok(cached.next);
        }
        let (now, _) = self.change_counter(table, Change::Peek).await?;
        Ok(now)
    }

    /// Restarts `table`'s counter at 1 (SQL's TRUNCATE): deletes its row
    /// and forgets this client's cached range. Other clients' cached
    /// ranges stay theirs until used up (see the module's documentation).
    pub async fn reset_auto_increment(&self, table: &Table) -> Result<(), ShoalError> {
        column_max(table)?;
        let entry = self.counters().entry(table.id());
        let mut cached = entry.lock().await;
        *cached = Cached::default();
        self.change_counter(table, Change::Remove).await?;
        Ok(())
    }

    /// Deletes the counter of dropped table `def` (if it has an
    /// AUTO_INCREMENT column), best effort: a row left behind is never
    /// met again, as table ids are not reused.
    pub(crate) async fn forget_auto_increment(&self, def: &TableDef) {
        if def.auto_increment_column().is_none() {
            return;
        }
        let entry = self.counters().remove(def.id);
        let _held = match &entry {
            Some(e) => Some(e.lock().await),
            None => None,
        };
        let table = Table::new(def.clone());
        if let Err(e) = self.change_counter(&table, Change::Remove).await {
            tracing::debug!(
                "deleting the AUTO_INCREMENT counter of dropped table `{}` (id {}): {e}",
                def.name,
                def.id
            );
        }
    }

    /// The system table, from the cache or mgmd; created if `create` and
    /// missing (`None` if missing otherwise).
    async fn sequence_table(&self, create: bool) -> Result<Option<Table>, ShoalError> {
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(backoff(attempt)).await;
            }
            match self.table_any(SEQUENCE_TABLE).await {
                Ok(t) => {
                    check_sequence_table(&t)?;
                    return Ok(Some(t));
                }
                Err(e) if e.code == ErrorCode::NoSuchTable && !create => return Ok(None),
                Err(e) if e.code == ErrorCode::NoSuchTable => {
                    match self.create_table_any(sequence_def()?).await {
                        Ok(t) => {
                            tracing::info!(
                                "created the AUTO_INCREMENT counters' table `{SEQUENCE_TABLE}`"
                            );
                            return Ok(Some(t));
                        }
                        // Another client created it first: mgmd shows it
                        // once every data node has it.
                        Err(e) if e.code == ErrorCode::TableExists => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(ShoalError::with_detail(
            ErrorCode::MgmdFailure,
            format!("table `{SEQUENCE_TABLE}` is being created by another client and did not appear; try again"),
        ))
    }

    /// Applies `change` to `table`'s counter row, trying again after a
    /// racing first insert, a stale system table or a temporary error.
    /// Returns the counter before and after.
    async fn change_counter(
        &self,
        table: &Table,
        change: Change,
    ) -> Result<(u64, u64), ShoalError> {
        let create = matches!(change, Change::Take { .. } | Change::Raise { .. });
        let mut last = None;
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(backoff(attempt)).await;
            }
            let sys = match self.sequence_table(create).await {
                Ok(Some(t)) => t,
                // No counter was ever kept: it stands at 1.
                Ok(None) => return Ok((1, 1)),
                Err(e) if e.class() == ErrorClass::Temporary => {
                    last = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            match self.change_once(&sys, table, change).await {
                Ok(r) => return Ok(r),
                // Two clients inserted the first row at once: read it.
                Err(e) if e.code == ErrorCode::TupleAlreadyExists => last = Some(e),
                Err(e)
                    if matches!(
                        e.code,
                        ErrorCode::NoSuchTable | ErrorCode::InvalidSchemaVersion
                    ) =>
                {
                    // The system table was dropped (and made again) by
                    // hand: a new counter, as for a new table.
                    self.invalidate_table(SEQUENCE_TABLE);
                    last = Some(e);
                }
                // Nothing of a failed try is handed out: an unknown
                // outcome only skips the range, if it did commit.
                Err(e) if e.class() != ErrorClass::Permanent => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        let e = last.unwrap_or_else(|| ShoalError::new(ErrorCode::ClusterFailure));
        let code = if e.class() == ErrorClass::Temporary {
            e.code
        } else {
            ErrorCode::ClusterFailure
        };
        Err(ShoalError::with_detail(
            code,
            format!(
                "the AUTO_INCREMENT counter of table `{}` could not be changed in {ATTEMPTS} tries; nothing was handed out, try again: {e}",
                table.name()
            ),
        ))
    }

    /// One transaction of [`Cluster::change_counter`].
    async fn change_once(
        &self,
        sys: &Table,
        table: &Table,
        change: Change,
    ) -> Result<(u64, u64), ShoalError> {
        let record = sys.full_record();
        let key = [Value::UInt(u64::from(table.id().0))];
        let mut tx = self.transaction();
        if let Change::Remove = change {
            let op = tx.delete(sys, &key)?;
            tx.ignore_error(op);
            tx.execute(ExecType::Commit).await?;
            return Ok((1, 1));
        }
        let lock = match change {
            Change::Peek => LockMode::CommittedRead,
            _ => LockMode::Exclusive,
        };
        let read = tx.read(&record, &key, lock)?;
        tx.ignore_error(read);
        tx.execute(ExecType::NoCommit).await?;
        let stored = match tx.row(read) {
            Some(row) => Some(
                row.get(NEXT_VALUE_COLUMN)
                    .and_then(|v| v.as_u64())
                    .ok_or_else(|| {
                        ShoalError::with_detail(
                            ErrorCode::Internal,
                            format!("the counter of table `{}` has no value", table.name()),
                        )
                    })?,
            ),
            None => None,
        };
        let before = stored.unwrap_or(1);
        let after = match change {
            Change::Take { want, max } => {
                if before > max {
                    return Err(exhausted(table.name(), max));
                }
                // `max` is at most u64::MAX - 1: `max + 1` fits.
                before.saturating_add(want).min(max + 1)
            }
            Change::Raise { above } => before.max(above.saturating_add(1)),
            Change::Peek | Change::Remove => before,
        };
        if after == before {
            tx.execute(ExecType::Rollback).await?;
            return Ok((before, after));
        }
        let row = [key[0].clone(), Value::UInt(after)];
        if stored.is_some() {
            tx.update(&record, &row)?;
        } else {
            tx.insert(&record, &row)?;
        }
        tx.execute(ExecType::Commit).await?;
        Ok((before, after))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(ranges: &[Range<u64>]) -> AutoIncrementValues {
        let mut v = AutoIncrementValues::default();
        for r in ranges {
            v.push(r.clone());
        }
        v
    }

    #[test]
    fn values_run_through_their_ranges_in_order() {
        let v = values(&[1..3, 3..4, 10..12, 12..12]);
        assert_eq!(v.ranges(), &[1..4, 10..12], "adjacent ranges merge");
        assert_eq!(v.len(), 5);
        assert_eq!(v.peek(), Some(1));
        assert_eq!(v.collect::<Vec<_>>(), vec![1, 2, 3, 10, 11]);
        assert!(values(&[]).is_empty());
    }

    #[test]
    fn skipping_through_an_explicit_value_keeps_only_values_above_it() {
        let mut v = values(&[1..4, 10..12]);
        v.skip_through(0);
        assert_eq!(v.peek(), Some(1));
        v.skip_through(2);
        assert_eq!(v.clone().collect::<Vec<_>>(), vec![3, 10, 11]);
        v.skip_through(5);
        assert_eq!(v.clone().collect::<Vec<_>>(), vec![10, 11]);
        v.skip_through(11);
        assert!(v.is_empty());
        assert_eq!(v.len(), 0);
        let mut top = values(&[u64::MAX - 2..u64::MAX - 1, u64::MAX - 1..u64::MAX]);
        top.skip_through(u64::MAX);
        assert!(top.is_empty());
    }

    #[test]
    fn only_the_system_table_is_refused_and_its_definition_is_checked() {
        assert_eq!(
            refuse_reserved(SEQUENCE_TABLE).unwrap_err().code,
            ErrorCode::NoSuchTable
        );
        assert!(refuse_reserved("t1").is_ok());
        let good = Table::new(sequence_def().unwrap());
        assert!(check_sequence_table(&good).is_ok());
        let other = TableDef::new(
            SEQUENCE_TABLE,
            vec![
                ColumnDef::new(TABLE_ID_COLUMN, ColumnType::Int { unsigned: true }),
                ColumnDef::new(NEXT_VALUE_COLUMN, ColumnType::Int { unsigned: true }),
            ],
            &[TABLE_ID_COLUMN],
        )
        .unwrap();
        assert!(check_sequence_table(&Table::new(other)).is_err());
    }

    #[test]
    fn the_cache_forgets_unused_ranges_past_its_bound() {
        let c = Counters::default();
        let held = c.entry(TableId(1));
        for id in 2..=CACHED_TABLES_MAX as u32 {
            c.entry(TableId(id));
        }
        assert_eq!(c.by_table.lock().unwrap().len(), CACHED_TABLES_MAX);
        c.entry(TableId(u32::MAX));
        let map = c.by_table.lock().unwrap();
        assert_eq!(map.len(), 2, "the one in use and the new one");
        assert!(Arc::ptr_eq(&map[&TableId(1)], &held));
    }
}
