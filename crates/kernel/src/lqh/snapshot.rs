//! LQH: the snapshot a restarted node logs of its rows once its copy is
//! done, so that its log alone can restore it again — written a few MiB
//! per tick while the node serves, not all at once (that would hold the
//! whole table in one buffer and stall the node).
//!
//! Why a snapshot written over many ticks is right: row changes are
//! logged from its `Snapshot` marker on, so each row's last logged image
//! is its current one whether the scan wrote the row before or after a
//! change to it (the scan writes the row as it is then, after the
//! changes before). But a row the scan writes late may hold changes of
//! epochs that began after the marker, so the log restores no epoch until
//! the `SnapshotDone` marker after the last row, which names the first
//! epoch the log can restore: no row it wrote holds a change of a later
//! one. The node saves no epoch before that one (its log could not
//! restore it).

use super::Lqh;
use crate::signal::FragKey;
use shoal_storage::redo::{RedoKind, RedoRecord};
use shoal_storage::RowId;

/// The epoch of a `Snapshot` marker whose snapshot is not whole yet:
/// none is that high, so the log restores nothing until a
/// `SnapshotDone` follows.
pub const VOID_SNAPSHOT_EPOCH: u64 = u64::MAX;

/// A snapshot being written.
pub(super) struct SnapshotScan {
    /// The logged fragments as it began, in order.
    frags: Vec<FragKey>,
    at: usize,
    next_row: RowId,
    rows: u64,
}

impl Lqh {
    /// Logs a `Snapshot` marker (superseding every earlier record) and
    /// logs row changes from here on; [`Lqh::snapshot_step`] then writes
    /// every committed row of every logged table.
    pub fn snapshot_begin(&mut self) {
        let Some(sink) = self.redo.as_mut() else {
            return;
        };
        sink.logging = !self.cfg.faults.snapshot_without_logging;
        self.append_marker(RedoKind::Snapshot, VOID_SNAPSHOT_EPOCH);
        let frags = self.logged_frags();
        assert!(self.snapshot.is_none(), "one snapshot at a time");
        self.snapshot = Some(SnapshotScan {
            frags,
            at: 0,
            next_row: 0,
            rows: 0,
        });
    }

    /// A snapshot is being written.
    pub fn snapshot_running(&self) -> bool {
        self.snapshot.is_some()
    }

    /// Writes rows of the snapshot until about `max_bytes` are appended.
    /// Once every row is written: `Some(rows)`, and the caller ends it
    /// with [`Lqh::snapshot_done`].
    pub fn snapshot_step(&mut self, max_bytes: usize) -> Option<u64> {
        let Lqh {
            redo,
            frags,
            snapshot,
            ..
        } = self;
        let scan = snapshot.as_mut()?;
        let Some(sink) = redo.as_mut() else {
            return Some(scan.rows);
        };
        let start = sink.writer.pending_bytes();
        while scan.at < scan.frags.len() {
            if sink.writer.pending_bytes().saturating_sub(start) >= max_bytes {
                return None;
            }
            let fkey = scan.frags[scan.at];
            // A table dropped meanwhile has nothing to write.
            let Some(id) = frags
                .get(&fkey)
                .and_then(|e| e.frag.next_row(scan.next_row))
            else {
                scan.at += 1;
                scan.next_row = 0;
                continue;
            };
            scan.next_row = id + 1;
            let entry = &frags[&fkey];
            if entry.frag.is_tentative(id) {
                continue; // an insert not committed: its commit logs it
            }
            let (fixed, var) = entry.frag.row(id);
            sink.writer.append(&RedoRecord {
                kind: RedoKind::Write,
                epoch: 0,
                table: fkey.0 .0,
                frag: fkey.1,
                row: id,
                key: fixed,
                attrs: var,
            });
            scan.rows += 1;
        }
        Some(scan.rows)
    }

    /// Ends the snapshot: no row it wrote holds a change of a later epoch
    /// than `epoch`, and the log restores `epoch` and later ones once they
    /// end. Returns the rows written.
    pub fn snapshot_done(&mut self, epoch: u64) -> u64 {
        let rows = self.snapshot.take().map_or(0, |s| s.rows);
        if let Some(sink) = self.redo.as_mut() {
            sink.max_epoch = sink.max_epoch.max(epoch);
            sink.logging = true;
        }
        self.append_marker(RedoKind::SnapshotDone, epoch);
        rows
    }
}
