//! LQH: the redo log of this node's committed changes, and bringing the
//! rows back from it after a restart.
//!
//! Every committed change of a logged table's row is appended as the
//! row's stored image after the change (fixed part in the record's key
//! field, var part in its attributes) or as a delete, with the epoch its
//! transaction committed in. A change reaches the log in the order it is
//! applied here, and a row's changes come in epoch order (a transaction
//! never commits in an earlier epoch than one whose change it saw), so
//! replaying the log's records of epochs up to E, in order, gives the rows
//! as they were at the end of E.
//!
//! Markers: `EpochEnd(e)` when the cluster saves epoch e (every record of
//! it is before the marker); `Restored(e)` when the node's rows were
//! brought to the end of e (records before it of later epochs never
//! happened; e = 0 voids everything before it).
//!
//! Sans-IO: the node hands the bytes out ([`crate::Output::RedoWrite`])
//! and the driver says when they are synced.

use super::chain_ids::ChainIds;
use super::warm::WARM_MAX;
use super::{FragEntry, Lqh};
use crate::signal::FragKey;
use shoal_storage::redo::{Lsn, RedoEntry, RedoKind, RedoRecord, RedoWriter};
use shoal_storage::{ChangedRows, Memory, RowId};
use shoal_types::{hash_key, TableId};
use std::collections::BTreeMap;

/// Log records between two progress reports of a restore.
const RESTORE_PROGRESS_EVERY: u64 = 1 << 20;

/// One piece of a node's checkpoint files: its records, the file bytes
/// they came from, and zeroed row-store pages the driver made ready for
/// them ([`shoal_storage::Memory::give_zeroed_pages`]; may be none).
#[derive(Debug, Default)]
pub struct LcpPiece {
    pub records: Vec<RedoEntry>,
    pub bytes: u64,
    pub zeroed_pages: Vec<Box<[u8]>>,
}

/// The records of a node's chain of checkpoint files, newest file first
/// (see [`ChainIds`]), handed over in pieces as they are read (so a restart holds a few
/// pieces in memory, not every checkpoint): `Ok(Some(piece))` the next
/// piece, `Ok(None)` the end, `Err(why)` a file is damaged or missing
/// (pieces before it may have been applied already).
pub type LcpPieces<'a> = dyn FnMut() -> Result<Option<LcpPiece>, String> + 'a;

/// Checkpoint files read whole and checked ([`super::check_lcp_file`]),
/// given oldest first as the sysfile names them and handed over newest
/// first, one file a piece (for drivers that keep them in memory: the
/// simulator, tests).
pub fn whole_lcp_files(
    files: &[Vec<RedoEntry>],
) -> impl FnMut() -> Result<Option<LcpPiece>, String> + '_ {
    let mut next = files.iter().rev();
    move || {
        Ok(next.next().map(|f| LcpPiece {
            records: f.clone(),
            ..LcpPiece::default()
        }))
    }
}

/// Why a restore from a node's own files failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// A checkpoint file is damaged: the rows restored so far must go
    /// (the node restores nothing and copies its rows instead).
    FilesDamaged(String),
    /// The rows do not fit (or do not match the tables): the node cannot
    /// start with these files.
    Failed(String),
}

impl std::fmt::Display for RestoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RestoreError::FilesDamaged(why) | RestoreError::Failed(why) => f.write_str(why),
        }
    }
}

/// The log being written.
pub(super) struct RedoSink {
    pub(super) writer: RedoWriter,
    /// Row changes are logged (not while the node copies its rows after
    /// joining a running cluster: a snapshot of every row follows once
    /// the copy is done).
    pub(super) logging: bool,
    /// The newest epoch of any change logged: no row holds a change of a
    /// later one.
    pub(super) max_epoch: u64,
}

/// What a node's own files gave back at start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreStats {
    /// Row changes applied (epochs up to the durable one).
    pub applied: u64,
    /// Row changes of later epochs kept until the cluster's restart
    /// epoch is known.
    pub tail: u64,
    /// Records skipped: voided by a later `Restored`, for a table or
    /// fragment this node no longer holds, or checkpoint rows a newer
    /// checkpoint of the chain holds again.
    pub skipped: u64,
    /// The newest epoch the log holds whole (0: none).
    pub restorable: u64,
    /// The oldest epoch it can restore.
    pub restorable_from: u64,
}

/// The record kinds' row changes, as applied to a fragment.
enum Change<'a> {
    Write { fixed: &'a [u8], var: &'a [u8] },
    Delete,
}

/// A committed change of `entry`'s row `row` (after it was applied):
/// stamps the row with its epoch and appends the change to the log, if
/// the table is logged and a log is kept.
pub(super) fn log_change(
    sink: &mut Option<RedoSink>,
    entry: &mut FragEntry,
    fkey: FragKey,
    row: RowId,
    epoch: u64,
    deleted: bool,
) {
    if !deleted {
        entry.epochs.set(row, epoch);
    }
    let Some(sink) = sink.as_mut() else {
        return;
    };
    if !entry.logged || !sink.logging {
        return;
    }
    sink.max_epoch = sink.max_epoch.max(epoch);
    let (kind, fixed, var) = if deleted {
        (RedoKind::Delete, &[][..], &[][..])
    } else {
        let (fixed, var) = entry.frag.row(row);
        (RedoKind::Write, fixed, var)
    };
    sink.writer.append(&RedoRecord {
        kind,
        epoch,
        table: fkey.0 .0,
        frag: fkey.1,
        row,
        key: fixed,
        attrs: var,
    });
}

impl Lqh {
    /// Keeps a redo log from here on, continuing at `start` (a block
    /// boundary after what the log held).
    pub fn enable_redo(&mut self, start: Lsn) {
        self.redo = Some(RedoSink {
            writer: RedoWriter::new(start),
            logging: true,
            max_epoch: 0,
        });
    }

    /// Stops logging row changes: the node joined a running cluster and
    /// copies its rows; [`Lqh::snapshot_begin`] starts it again.
    pub fn pause_redo(&mut self) {
        if let Some(s) = self.redo.as_mut() {
            s.logging = false;
        }
    }

    /// The newest epoch of a change logged so far (a checkpoint taken now
    /// holds no row of a later one).
    pub fn redo_max_epoch(&self) -> u64 {
        self.redo.as_ref().map_or(0, |s| s.max_epoch)
    }

    /// Refuses writes to logged tables (`Some(why)`) or takes them again.
    pub fn set_redo_full(&mut self, why: Option<String>) {
        self.redo_full = why;
    }

    pub fn redo_full(&self) -> Option<&str> {
        self.redo_full.as_deref()
    }

    /// A log is kept and row changes go to it (not paused for a copy).
    pub fn redo_logging(&self) -> bool {
        self.redo.as_ref().is_some_and(|s| s.logging)
    }

    pub fn redo_enabled(&self) -> bool {
        self.redo.is_some()
    }

    /// Bytes appended and not handed out yet.
    pub fn redo_pending_bytes(&self) -> usize {
        self.redo.as_ref().map_or(0, |s| s.writer.pending_bytes())
    }

    /// The log position after the last record appended.
    pub fn redo_end(&self) -> Lsn {
        self.redo.as_ref().map_or(0, |s| s.writer.end())
    }

    /// The bytes to write (padded to a block) and where.
    pub fn take_redo(&mut self) -> Option<(Lsn, Vec<u8>)> {
        self.redo.as_mut()?.writer.take()
    }

    /// Appends a marker; returns the position after it.
    pub fn append_marker(&mut self, kind: RedoKind, epoch: u64) -> Lsn {
        debug_assert!(kind.is_marker());
        let Some(sink) = self.redo.as_mut() else {
            return 0;
        };
        sink.writer.append(&RedoRecord {
            kind,
            epoch,
            table: 0,
            frag: 0,
            row: 0,
            key: &[],
            attrs: &[],
        })
    }

    /// Brings the rows to the end of epoch `through` from the local
    /// checkpoints (`lcp`, read piece by piece; `lcp_chain` whether the
    /// sysfile names any) and the log read back at start from the
    /// checkpoints' `redo_start`; records of later epochs up to the newest
    /// one the log holds whole are kept for [`Lqh::restore_tail`]. No row
    /// in the checkpoints is of an epoch after `lcp_max_epoch`. Call after
    /// every table is created and before any operation runs. `progress`
    /// hears (bytes read, bytes in all) of `lcp_bytes + log_bytes`.
    #[allow(clippy::too_many_arguments)]
    pub fn restore_from_log(
        &mut self,
        lcp: &mut LcpPieces<'_>,
        lcp_chain: bool,
        lcp_max_epoch: u64,
        lcp_bytes: u64,
        entries: &[RedoEntry],
        log_bytes: u64,
        through: u64,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<RestoreStats, RestoreError> {
        let mut stats = RestoreStats::default();
        // Everything before the last `Snapshot` is superseded by it. After
        // it, a record is void if a later `Restored` marker names an
        // earlier epoch than its own: the bound of each record is the
        // smallest epoch of those markers after it.
        let snapshot_at = entries.iter().rposition(|e| e.kind() == RedoKind::Snapshot);
        let first = snapshot_at.unwrap_or(0);
        // The checkpoints stand before the log, like a snapshot of their
        // `max_epoch` (their rows are stamped 0); a snapshot in the log
        // supersedes them too.
        let use_lcp = snapshot_at.is_none() && lcp_chain;
        // Snapshot rows are stamped 0 and stand for the snapshot's epoch:
        // if the durable epoch is older than that, nothing after the
        // snapshot is applied now (all of it waits, in log order, for the
        // cluster's restart epoch, which is then at least the snapshot's).
        // A snapshot written over many ticks stands for the epoch its
        // `SnapshotDone` names (none before: it restores nothing).
        let snapshot_epoch = match snapshot_at {
            Some(i) if entries[i].epoch() == super::VOID_SNAPSHOT_EPOCH => entries[i + 1..]
                .iter()
                .find(|e| e.kind() == RedoKind::SnapshotDone)
                .map_or(super::VOID_SNAPSHOT_EPOCH, RedoEntry::epoch),
            Some(i) => entries[i].epoch(),
            None if use_lcp => lcp_max_epoch,
            None => 0,
        };
        let apply_now = through >= snapshot_epoch;
        // Rows stamped 0 changed last in that epoch or before (none are
        // expected without one: unknown then).
        self.restore_floor = if snapshot_epoch == 0 {
            u64::MAX
        } else {
            snapshot_epoch
        };
        let mut bound_after = vec![u64::MAX; entries.len() + 1];
        for (i, e) in entries.iter().enumerate().rev() {
            bound_after[i] = match e.kind() {
                RedoKind::Restored => bound_after[i + 1].min(e.epoch()),
                _ => bound_after[i + 1],
            };
        }
        // What the files can restore: every epoch from the checkpoints'
        // newest (the end of that epoch was saved before they were
        // recorded), or from the last `Restored` marker (a cluster restart
        // at that epoch) or `Snapshot` (the epoch the rows after it stand
        // for, or `SnapshotDone`'s), to the last end-of-epoch marker.
        if use_lcp {
            stats.restorable = lcp_max_epoch;
            stats.restorable_from = lcp_max_epoch;
        }
        for e in entries {
            match e.kind() {
                RedoKind::EpochEnd => stats.restorable = stats.restorable.max(e.epoch()),
                RedoKind::Restored => {
                    // Epochs the log claimed whole before this restart
                    // and after its epoch never happened.
                    stats.restorable = e.epoch();
                    stats.restorable_from = e.epoch();
                }
                RedoKind::Snapshot => {
                    stats.restorable = 0;
                    stats.restorable_from = e.epoch();
                }
                // Only after a snapshot of the void epoch (written before
                // any end-of-epoch marker after it).
                RedoKind::SnapshotDone => stats.restorable_from = e.epoch(),
                _ => {}
            }
        }
        let mut tail = Vec::new();
        // Progress over the bytes read: the checkpoints', then the log's.
        let total = lcp_bytes + log_bytes;
        let mut done = 0u64;
        progress(0, total);
        if use_lcp {
            let read = self.restore_lcp(lcp, apply_now, &mut stats, &mut tail, &mut |bytes| {
                done += bytes;
                progress(done.min(lcp_bytes), total);
            });
            // Spare pages the rows did not take go, whatever happened.
            self.mem.drop_spare_pages();
            read?;
        }
        let per_record = log_bytes / (entries.len() as u64).max(1);
        // A snapshot not followed by an end-of-epoch marker yet leaves an
        // empty range (`restorable < restorable_from`): the log restores
        // nothing, not even "no rows".
        stats.skipped += entries[..first]
            .iter()
            .filter(|e| !e.kind().is_marker())
            .count() as u64;
        for (i, e) in entries.iter().enumerate().skip(first) {
            if (i as u64).is_multiple_of(RESTORE_PROGRESS_EVERY) {
                progress(lcp_bytes + i as u64 * per_record, total);
            }
            if e.kind().is_marker() {
                continue;
            }
            let epoch = e.epoch();
            if epoch > bound_after[i + 1] {
                stats.skipped += 1;
            } else if apply_now && epoch <= through {
                if self
                    .apply_record(&e.record())
                    .map_err(RestoreError::Failed)?
                {
                    stats.applied += 1;
                } else {
                    stats.skipped += 1;
                }
            } else if epoch <= stats.restorable {
                tail.push(e.to_owned_entry());
                stats.tail += 1;
            } else {
                stats.skipped += 1;
            }
        }
        self.restore_tail = tail;
        progress(total, total);
        Ok(stats)
    }

    /// Applies the kept records of epochs up to `epoch` (the cluster's
    /// restart epoch) and drops the rest; returns how many applied.
    pub fn restore_tail(&mut self, epoch: u64) -> Result<u64, String> {
        let tail = std::mem::take(&mut self.restore_tail);
        let mut applied = 0;
        for e in &tail {
            let r = e.record();
            if r.epoch <= epoch && self.apply_record(&r)? {
                applied += 1;
            }
        }
        Ok(applied)
    }

    /// Forgets every row (a node joining a running cluster copies them
    /// all from live replicas instead).
    pub fn drop_all_rows(&mut self) {
        self.restore_tail.clear();
        let Lqh { frags, mem, .. } = self;
        for entry in frags.values_mut() {
            debug_assert!(
                entry.pending.is_empty(),
                "no transaction runs before a join"
            );
            entry.frag.drop_all(mem);
            entry.epochs.clear();
            entry.unverified.clear();
            entry.copy_since = 0;
        }
    }

    /// A node joining a running cluster keeps the rows its files restored
    /// through epoch `since` (the durable epoch its sysfile recorded: no
    /// restart of the cluster goes back before it, so they are the
    /// cluster's rows as of then) for its logged tables; the copy brings
    /// only what changed after. Rows of other tables go (there are none:
    /// nothing restores them). Every kept row is unverified until the copy
    /// passes it. Returns the logged tables and the rows kept.
    pub fn keep_rows_for_copy(&mut self, since: u64) -> (BTreeMap<TableId, u64>, u64) {
        assert!(since > 0, "a copy since epoch 0 is a full copy");
        self.restore_tail.clear();
        let Lqh { frags, mem, .. } = self;
        let mut tables = BTreeMap::new();
        let mut kept = 0;
        for (&(table, _), entry) in frags.iter_mut() {
            debug_assert!(
                entry.pending.is_empty(),
                "no transaction runs before a join"
            );
            if !entry.logged {
                entry.frag.drop_all(mem);
                entry.epochs.clear();
                continue;
            }
            tables.insert(table, since);
            entry.copy_since = since;
            entry.unverified.clear();
            let mut at = 0;
            while let Some(id) = entry.frag.next_row(at) {
                at = id + 1;
                entry.unverified.mark(id);
                kept += 1;
            }
        }
        (tables, kept)
    }

    /// The checkpoints' rows, piece by piece (newest file first): applied
    /// now (`apply_now`), skipping what newer files supersede
    /// ([`ChainIds`]), or kept in `tail` oldest file first for the
    /// cluster's restart epoch. `read` hears the file bytes of each piece
    /// done.
    fn restore_lcp(
        &mut self,
        lcp: &mut LcpPieces<'_>,
        apply_now: bool,
        stats: &mut RestoreStats,
        tail: &mut Vec<RedoEntry>,
        read: &mut dyn FnMut(u64),
    ) -> Result<(), RestoreError> {
        let mut chain = ChainIds::default();
        // The kept path's files, in the order read (reversed at the end).
        let mut tail_files: Vec<Vec<RedoEntry>> = Vec::new();
        while let Some(piece) = lcp().map_err(RestoreError::FilesDamaged)? {
            let LcpPiece {
                records,
                bytes,
                zeroed_pages,
            } = piece;
            if apply_now {
                self.mem.give_zeroed_pages(zeroed_pages);
            }
            let mut window = Vec::with_capacity(WARM_MAX);
            for e in &records {
                let kind = e.kind();
                if kind == RedoKind::LcpBegin {
                    // A window never spans files: within one, later
                    // records win over earlier ones, across files the
                    // newer file does.
                    self.apply_lcp_window(&mut window, &chain, stats)?;
                    chain.begin_file(e.epoch())?;
                    if !apply_now {
                        tail_files.push(Vec::new());
                    }
                    continue;
                }
                if kind.is_marker() {
                    continue;
                }
                if !chain.in_file() {
                    return Err(RestoreError::Failed(
                        "checkpoint rows came before any checkpoint's begin record".into(),
                    ));
                }
                if !apply_now {
                    if let Some(file) = tail_files.last_mut() {
                        file.push(e.to_owned_entry());
                    }
                    stats.tail += 1;
                    continue;
                }
                let r = e.record();
                if chain.superseded((TableId(r.table), r.frag), r.row) {
                    stats.skipped += 1;
                    continue;
                }
                window.push(r);
                if window.len() == WARM_MAX {
                    self.apply_lcp_window(&mut window, &chain, stats)?;
                }
            }
            self.apply_lcp_window(&mut window, &chain, stats)?;
            read(bytes);
        }
        for file in tail_files.into_iter().rev() {
            tail.extend(file);
        }
        Ok(())
    }

    /// Applies and empties a window of checkpoint rows; those not applied
    /// (their fragment is not here, or a newer file put their key
    /// elsewhere) count as skipped.
    fn apply_lcp_window(
        &mut self,
        window: &mut Vec<RedoRecord<'_>>,
        chain: &ChainIds,
        stats: &mut RestoreStats,
    ) -> Result<(), RestoreError> {
        let applied = self
            .apply_window(window, Some(&chain.newer))
            .map_err(RestoreError::Failed)?;
        stats.applied += applied;
        stats.skipped += window.len() as u64 - applied;
        window.clear();
        Ok(())
    }

    /// One row change from the log; false if its fragment is not here.
    pub(super) fn apply_record(&mut self, r: &RedoRecord) -> Result<bool, String> {
        self.apply_window(std::slice::from_ref(r), None)
            .map(|n| n == 1)
    }

    /// Applies records (a window of checkpoint rows, or one log record; at
    /// most [`WARM_MAX`]) after bringing every one's index slot into the
    /// cache: a restore into a fragment of millions of rows misses the
    /// cache on each key's slot, and the misses of a window overlap
    /// instead of coming one after another.
    /// `newer`: the ids newer checkpoint files of the chain held (see
    /// [`ChainIds`]). Returns how many were applied.
    fn apply_window(
        &mut self,
        window: &[RedoRecord<'_>],
        newer: Option<&BTreeMap<FragKey, ChangedRows>>,
    ) -> Result<u64, String> {
        debug_assert!(window.len() <= WARM_MAX);
        let mut keys = std::mem::take(&mut self.restore_keys);
        keys.resize_with(window.len().max(keys.len()), Vec::new);
        let mut hashes = [0u64; WARM_MAX];
        for (i, r) in window.iter().enumerate() {
            hashes[i] = self.restore_key_of(r, &mut keys[i]);
        }
        let mut seen = 0u8;
        for (i, r) in window.iter().enumerate() {
            if let Some(entry) = self.frags.get(&(TableId(r.table), r.frag)) {
                if let Some(row) = entry.frag.guess(hashes[i]) {
                    seen ^= entry.frag.touch(row);
                }
            }
        }
        std::hint::black_box(seen);
        let mut applied = 0;
        let mut result = Ok(());
        for (i, r) in window.iter().enumerate() {
            match self.apply_keyed(r, &keys[i], hashes[i], newer) {
                Ok(true) => applied += 1,
                Ok(false) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.restore_keys = keys;
        result.map(|()| applied)
    }

    /// The key a write record puts back, into `key`, and its hash (empty
    /// and 0 for a delete, or a record whose fragment is not here or whose
    /// image has the wrong shape: [`put_row`] reports that).
    fn restore_key_of(&self, r: &RedoRecord, key: &mut Vec<u8>) -> u64 {
        key.clear();
        if r.kind != RedoKind::Write {
            return 0;
        }
        match self.frags.get(&(TableId(r.table), r.frag)) {
            Some(entry) if r.key.len() == entry.layout.fixed_size => {
                entry.layout.key_of_row(r.key, r.attrs, key);
                hash_key(key)
            }
            _ => 0,
        }
    }

    /// [`Lqh::apply_record`] with the record's key and hash at hand; false
    /// if its fragment is not here or a newer checkpoint superseded it.
    fn apply_keyed(
        &mut self,
        r: &RedoRecord,
        key: &[u8],
        hash: u64,
        newer: Option<&BTreeMap<FragKey, ChangedRows>>,
    ) -> Result<bool, String> {
        let frag_key = (TableId(r.table), r.frag);
        let Some(entry) = self.frags.get_mut(&frag_key) else {
            return Ok(false);
        };
        let newer = newer.and_then(|n| n.get(&frag_key));
        let change = match r.kind {
            RedoKind::Write => Change::Write {
                fixed: r.key,
                var: r.attrs,
            },
            _ => Change::Delete,
        };
        let write = r.kind == RedoKind::Write;
        if !put_row(entry, &mut self.mem, r.row, change, key, hash, newer)? {
            return Ok(false);
        }
        if write {
            // Checkpoint and snapshot rows are stamped 0: they changed
            // last in the epoch they stand for, or before.
            let epoch = if r.epoch == 0 {
                self.restore_floor
            } else {
                r.epoch
            };
            entry.epochs.set(r.row, epoch);
        }
        Ok(true)
    }
}

/// Makes row id `row` of `entry` hold `change`: the image (replacing
/// what is there, and moving the key from another id should it sit
/// elsewhere), or nothing. `key` and `hash` are the image's key and its
/// hash ([`Lqh::restore_key_of`]). `newer`: the ids newer checkpoint files
/// held ([`ChainIds`]); an image whose key one of them holds is older
/// than that row, and only frees `row`. False if so.
fn put_row(
    entry: &mut FragEntry,
    mem: &mut Memory,
    row: RowId,
    change: Change<'_>,
    key: &[u8],
    hash: u64,
    newer: Option<&ChangedRows>,
) -> Result<bool, String> {
    let image = match change {
        Change::Write { fixed, var } => {
            if fixed.len() != entry.layout.fixed_size {
                return Err(format!(
                    "row {row}: a fixed part of {} bytes, the table's is {}",
                    fixed.len(),
                    entry.layout.fixed_size
                ));
            }
            Some((fixed, var))
        }
        Change::Delete => None,
    };
    if !entry.frag.is_free(row) {
        let mut held = Vec::new();
        entry.frag.key_of(row, &mut held);
        if let Some((fixed, var)) = image.filter(|_| held == key) {
            return entry
                .frag
                .replace(mem, row, fixed, Some(var))
                .map(|()| true)
                .map_err(|e| oom(row, e.requested_bytes, e.free_bytes));
        }
        entry.frag.remove(mem, hash_key(&held), row);
    }
    let Some((fixed, var)) = image else {
        return Ok(true);
    };
    if let Some(other) = entry.frag.lookup(hash, key) {
        if newer.is_some_and(|ids| ids.contains(other)) {
            return Ok(false);
        }
        entry.frag.remove(mem, hash, other);
    }
    entry
        .frag
        .insert_tentative_at(mem, hash, row, fixed, var)
        .map_err(|e| oom(row, e.requested_bytes, e.free_bytes))?;
    entry.frag.commit_insert(mem, row);
    Ok(true)
}

fn oom(row: RowId, requested: usize, free: usize) -> String {
    format!(
        "out of data memory restoring row {row}: needed {requested} bytes, {free} free; raise data_memory"
    )
}
