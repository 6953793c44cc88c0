//! LQH: local checkpoints — a fuzzy scan of every logged fragment's rows
//! into a checkpoint file, so the redo log before the checkpoint's start
//! can go, and reading a chain of them back at a restart.
//!
//! Why fuzzy is enough: the scan runs while transactions commit, so each
//! row is written as it was when the scan passed it, not as of one
//! instant. But every change after the checkpoint began is in the redo
//! log after `redo_start`, as the whole stored row (or a delete) at its
//! row id, in the order applied. Replaying that part of the log over the
//! checkpoint gives each row id its last logged contents; a row id the log
//! does not touch after `redo_start` did not change after the scan began,
//! so the checkpoint holds it as it was then and still is.
//!
//! Why a checkpoint waits for its epochs: the scan may write a row in an
//! epoch that never becomes durable (a crash of every node loses it).
//! So a checkpoint is used only once every epoch of a row it holds is
//! durable (`max_epoch`); the node records it in the sysfile then.
//!
//! Incremental: a fragment marks every row id whose committed contents
//! change (`ChangedRows`). A partial checkpoint writes only the marked
//! ids — the row, or a delete for an id now free — and clears the marks
//! as it goes; a full one writes every row. A restart reads the last full
//! checkpoint and the partial ones after it, newest first (an older
//! record of an id a newer file held is skipped: `chain_ids.rs`), then
//! the log.
//!
//! Record format: the redo log's (chunks in checksummed 4 KiB blocks, the
//! position in every checksum), a checkpoint's position being its file
//! offset. `LcpBegin` first, `LcpEnd` last (docs/FILES.md).

use super::{FragEntry, Lqh};
use crate::signal::FragKey;
use shoal_storage::redo::{Lsn, RedoEntry, RedoKind, RedoRecord, RedoWriter};
use shoal_storage::RowId;
use shoal_types::TableId;

/// A checkpoint being written.
pub(super) struct LcpScan {
    id: u64,
    full: bool,
    /// The file's bytes not handed out yet (positions are file offsets).
    writer: RedoWriter,
    /// The logged fragments as the checkpoint began, in order.
    frags: Vec<FragKey>,
    at: usize,
    next_row: RowId,
    rows: u64,
    deletes: u64,
    done: bool,
}

/// What one checkpoint wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LcpCounts {
    pub rows: u64,
    pub deletes: u64,
    /// Bytes of its file.
    pub bytes: u64,
}

/// Why a chain of checkpoint files cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LcpFileError {
    pub id: u64,
    pub detail: String,
}

fn marker(kind: RedoKind, id: u64, frag: u32) -> RedoRecord<'static> {
    RedoRecord {
        kind,
        epoch: id,
        table: 0,
        frag,
        row: 0,
        key: &[],
        attrs: &[],
    }
}

/// Checks that `entries` are one whole checkpoint file of checkpoint
/// `id`: its begin record first, its end record last. Returns whether it
/// is a full one.
pub fn check_lcp_file(id: u64, entries: &[RedoEntry]) -> Result<bool, LcpFileError> {
    let bad = |detail: &str| LcpFileError {
        id,
        detail: detail.to_string(),
    };
    let first = entries.first().map(RedoEntry::record);
    let last = entries.last().map(RedoEntry::record);
    let full = match first {
        Some(r) if r.kind == RedoKind::LcpBegin && r.epoch == id => r.frag == 1,
        _ => return Err(bad("it does not begin with its checkpoint's begin record")),
    };
    match last {
        Some(r) if r.kind == RedoKind::LcpEnd && r.epoch == id && entries.len() >= 2 => {}
        _ => {
            return Err(bad(
                "it does not end with its end record (written only in part)",
            ))
        }
    }
    Ok(full)
}

impl Lqh {
    /// The fragments of logged tables, in order (what a checkpoint or a
    /// snapshot walks).
    pub(super) fn logged_frags(&self) -> Vec<FragKey> {
        let mut frags: Vec<FragKey> = self
            .frags
            .iter()
            .filter(|(_, e)| e.logged)
            .map(|(&k, _)| k)
            .collect();
        frags.sort_unstable();
        frags
    }

    /// Starts writing checkpoint `id` (full: every row; partial: the rows
    /// changed since the previous one). The caller took `redo_start`, the
    /// log position from which the log holds every later change.
    pub fn lcp_begin(&mut self, id: u64, full: bool) {
        assert!(self.lcp.is_none(), "one checkpoint at a time");
        let frags = self.logged_frags();
        if full {
            // Every row is written below; marks set from now on are for
            // rows the scan may pass after (or before) their change.
            for k in &frags {
                if let Some(e) = self.frags.get_mut(k) {
                    e.frag.changed_rows().clear();
                }
            }
        }
        let mut writer = RedoWriter::new(0);
        writer.append(&marker(RedoKind::LcpBegin, id, u32::from(full)));
        self.lcp = Some(LcpScan {
            id,
            full,
            writer,
            frags,
            at: 0,
            next_row: 0,
            rows: 0,
            deletes: 0,
            done: false,
        });
    }

    /// Row ids of logged fragments changed since the last checkpoint, and
    /// the rows they hold: a partial checkpoint writes the first.
    pub fn lcp_changed_rows(&mut self) -> (u64, u64) {
        let mut changed = 0;
        let mut rows = 0;
        for e in self.frags.values_mut().filter(|e| e.logged) {
            rows += e.frag.row_count() as u64;
            changed += e.frag.changed_rows().count() as u64;
        }
        (changed, rows)
    }

    /// The checkpoint being written, if any: (id, full).
    pub fn lcp_running(&self) -> Option<(u64, bool)> {
        self.lcp.as_ref().map(|s| (s.id, s.full))
    }

    /// Scans on until about `budget` more bytes were appended to the file
    /// or every fragment was passed (then its end record is appended).
    /// Returns true once the scan is done.
    pub fn lcp_step(&mut self, budget: usize) -> bool {
        let Lqh { lcp, frags, .. } = self;
        let Some(scan) = lcp.as_mut() else {
            return false;
        };
        if scan.done {
            return true;
        }
        let stop_at = scan.writer.end() + budget as u64;
        while scan.at < scan.frags.len() {
            let fkey = scan.frags[scan.at];
            let Some(entry) = frags.get_mut(&fkey) else {
                // Dropped meanwhile.
                scan.at += 1;
                scan.next_row = 0;
                continue;
            };
            if !scan_fragment(scan, fkey, entry, stop_at) {
                return false;
            }
            scan.at += 1;
            scan.next_row = 0;
        }
        scan.writer
            .append(&marker(RedoKind::LcpEnd, scan.id, u32::from(scan.full)));
        scan.done = true;
        true
    }

    /// The checkpoint file's bytes appended since the last call, padded to
    /// a block, with their offset: (id, offset, bytes).
    pub fn lcp_take(&mut self) -> Option<(u64, u64, Vec<u8>)> {
        let scan = self.lcp.as_mut()?;
        let (offset, bytes) = scan.writer.take()?;
        Some((scan.id, offset, bytes))
    }

    /// Ends the checkpoint being written (its file was all handed out):
    /// what it wrote.
    pub fn lcp_finish(&mut self) -> LcpCounts {
        let scan = self.lcp.take().expect("a checkpoint runs");
        assert!(scan.done, "a checkpoint finishes after its scan");
        debug_assert_eq!(scan.writer.pending_bytes(), 0, "every byte handed out");
        LcpCounts {
            rows: scan.rows,
            deletes: scan.deletes,
            bytes: scan.writer.end(),
        }
    }

    /// Drops the checkpoint being written (its file is never used). The
    /// marks it cleared are lost: the next checkpoint must be full.
    pub fn lcp_abandon(&mut self) {
        self.lcp = None;
    }
}

/// Writes `entry`'s rows from the scan's position on; false if it stopped
/// for the budget (the position is kept).
fn scan_fragment(scan: &mut LcpScan, fkey: FragKey, entry: &mut FragEntry, stop_at: Lsn) -> bool {
    let (TableId(table), frag) = fkey;
    loop {
        if scan.writer.end() >= stop_at {
            return false;
        }
        let end = entry.frag.id_end();
        let next = if scan.full {
            entry.frag.next_row(scan.next_row)
        } else {
            entry.frag.changed_rows().next(scan.next_row, end)
        };
        let Some(row) = next else {
            return true;
        };
        scan.next_row = row + 1;
        let changed = entry.frag.changed_rows().take(row);
        debug_assert!(scan.full || changed, "a partial scan visits changed ids");
        let committed = !entry.frag.is_free(row) && !entry.frag.is_tentative(row);
        if committed {
            let (fixed, var) = entry.frag.row(row);
            scan.writer.append(&RedoRecord {
                kind: RedoKind::Write,
                epoch: 0,
                table,
                frag,
                row,
                key: fixed,
                attrs: var,
            });
            scan.rows += 1;
        } else if !scan.full {
            // Free now (or holding an insert not committed yet: its
            // commit marks the id again).
            scan.writer.append(&RedoRecord {
                kind: RedoKind::Delete,
                epoch: 0,
                table,
                frag,
                row,
                key: &[],
                attrs: &[],
            });
            scan.deletes += 1;
        }
    }
}
