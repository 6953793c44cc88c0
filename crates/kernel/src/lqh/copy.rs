//! LQH: copying a fragment to a restarting replica (NDB's COPY_FRAGREQ).
//!
//! The source is the fragment's primary. The restarting replica already
//! takes every write to the fragment (it is last in every write chain), so
//! the copy only has to bring it the rows as they are now:
//! - The source walks the fragment in row-id order, in batches, reading
//!   each row under a shared lock (so it waits for a transaction that
//!   changed the row, which may have begun before the replica joined the
//!   chain, to finish) and releasing it at once. A batch says which ids it
//!   covers: an id in the range with no row sent holds no row.
//! - An operation that runs on the primary after its row was sent carries
//!   `copied`; the target holds it until its own copy cursor has passed
//!   the row, then applies it on the copy. (With two replicas the copy
//!   and the operation share a link and arrive in order anyway; with
//!   three the operation comes through the middle replica and may
//!   overtake the copy.) An operation on a row not sent yet needs nothing
//!   at the target: the copy reads the row after the operation's
//!   transaction is done with it.
//! - The target stores each row at its id, unless a transaction holds the
//!   row there (that transaction's operations reached the target in order
//!   after the row was copied, or created it there: the live stream is
//!   newer than the copy).
//! - Flow control: at most [`COPY_WINDOW`] batches unconfirmed, and a rate
//!   limit of `copy_bytes_per_sec` (0: none).
//!
//! A copy since an epoch (NDB's node restart with its own files): the
//! target restored its own checkpoints and log through epoch S, the
//! durable epoch its sysfile recorded, and kept those rows. Every row
//! carries the epoch of its last change, so the source sends only rows
//! changed after S, and with each batch a bitmap of which ids in its range
//! hold a row: an id that holds one and is not sent is unchanged since S,
//! and the target holds that very row at that id (row ids are the same on
//! every replica, and its rows are the cluster's as of S). The receiving
//! side is in `copy_target.rs`.

use super::Lqh;
use crate::dih::Dih;
use crate::signal::{BlockSignal, ClusterSignal, CopyRow, FragKey, TxnRef};
use shoal_storage::{LockMode as RowLock, LockOutcome, RowId, WaitToken};
use shoal_types::distribution::FragmentId;
use shoal_types::{ErrorCode, TableId, TransId};
use std::collections::VecDeque;

/// Commit markers in one `CopyMarkers` signal (18 bytes each: well inside
/// the smallest frame).
const COPY_MARKERS_PER_SIGNAL: usize = 2048;

/// Unconfirmed batches a copy may have out at once.
pub const COPY_WINDOW: u32 = 4;
/// Bytes per batch at most (one row may exceed it alone, within a frame).
pub const COPY_BATCH_BYTES: usize = 256 * 1024;
/// Row ids one batch of a copy since an epoch covers at most (its bitmap
/// is then 4 KiB), so a batch of unchanged rows stays small.
pub const COPY_BATCH_IDS: u32 = 32 * 1024;

/// A copy's totals, for the restart's progress and figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyStats {
    /// Rows sent (or received).
    pub rows: u64,
    pub bytes: u64,
    /// Rows the target kept: unchanged since the epoch its own files
    /// restored (a copy since an epoch).
    pub kept: u64,
}

/// The sending side of one fragment copy.
pub(super) struct CopyScan {
    /// Who asked (the president), told when the target has everything.
    requester: u16,
    /// The target's start this copy is for.
    incarnation: u32,
    /// 0: every row. Otherwise rows changed after this epoch, and a
    /// bitmap of the ids holding a row.
    since: u64,
    /// The lock owner this scan reads as (never a transaction handle).
    owner: u64,
    next_row: RowId,
    seq: u32,
    unconfirmed: u32,
    /// The final batch is sent.
    done_sending: bool,
    /// Waiting for the lock on this row.
    wait: Option<(WaitToken, RowId)>,
    /// A row whose lock the scan holds after waiting (read it first).
    granted_row: Option<RowId>,
    /// Not before this time (rate limit).
    next_send_ms: u64,
    /// When the copy began: the rate limit paces every byte sent since,
    /// so ticks' granularity does not round the rate down (a scan held
    /// back by a lock wait may catch up, within its window).
    began_ms: u64,
    stats: CopyStats,
}

impl CopyScan {
    /// One line, for a diagnosis.
    pub(super) fn describe(&self) -> String {
        format!(
            "owner {:#x}, since epoch {}, next row {}, waiting {:?}, granted {:?}, done sending {}",
            self.owner, self.since, self.next_row, self.wait, self.granted_row, self.done_sending
        )
    }
}

impl Lqh {
    /// The president asks this node (the fragment's primary) to copy it
    /// to `target`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn copy_frag_req(
        &mut self,
        now_ms: u64,
        from: u16,
        table: TableId,
        frag: FragmentId,
        target: u16,
        since: u64,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let key = (table, frag);
        if !self.frags.contains_key(&key) {
            out.push_back(BlockSignal::from(ClusterSignal::CopyFragRef {
                to: from,
                table,
                frag,
                node: target,
                code: ErrorCode::NoSuchTable as u16,
                detail: format!("fragment {frag} of table {table} is not on this node"),
            }));
            return;
        }
        // Only a copy the distribution state expects: the target is the
        // starting node and its replica of this fragment is being copied
        // (the president says so on this link before it asks). A request
        // from before the target failed, delivered late or repeated,
        // finds it not copying and is dropped: copying to a node that is
        // gone would wait for its confirmations forever, and take the
        // place of the copy its next start needs.
        let Some(incarnation) = dih
            .is_copying(target, table, frag)
            .then(|| dih.incarnation_of(target))
            .flatten()
        else {
            return;
        };
        match self.copies.get(&(key, target)) {
            Some(scan) if scan.incarnation == incarnation => return, // a repeat
            Some(_) => self.end_copy((key, target)),
            None => {}
        }
        let owner = self.next_copy_owner;
        self.next_copy_owner += 1;
        self.copies.insert(
            (key, target),
            CopyScan {
                requester: from,
                incarnation,
                since,
                owner,
                next_row: 0,
                seq: 0,
                unconfirmed: 0,
                done_sending: false,
                wait: None,
                granted_row: None,
                next_send_ms: now_ms,
                began_ms: now_ms,
                stats: CopyStats::default(),
            },
        );
        self.copy_pump(now_ms, key, target, dih, out);
    }

    /// The target confirmed batch `seq`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn copy_rows_conf(
        &mut self,
        now_ms: u64,
        target: u16,
        table: TableId,
        frag: FragmentId,
        seq: u32,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let key = (table, frag);
        let Some(scan) = self.copies.get_mut(&(key, target)) else {
            return;
        };
        if seq >= scan.seq || scan.unconfirmed == 0 {
            return; // not a batch in flight (a repeat)
        }
        scan.unconfirmed -= 1;
        if scan.done_sending && scan.unconfirmed == 0 {
            let scan = self.copies.remove(&(key, target)).expect("present");
            out.push_back(BlockSignal::from(ClusterSignal::CopyFragConf {
                to: scan.requester,
                table,
                frag,
                node: target,
                rows: scan.stats.rows,
                bytes: scan.stats.bytes,
            }));
            return;
        }
        self.copy_pump(now_ms, key, target, dih, out);
    }

    /// Timers: copies held back by the rate limit go on.
    pub fn copy_tick(&mut self, now_ms: u64, dih: &Dih, out: &mut VecDeque<BlockSignal>) {
        let due: Vec<(FragKey, u16)> = self
            .copies
            .iter()
            .filter(|(_, s)| !s.done_sending && s.wait.is_none() && now_ms >= s.next_send_ms)
            .map(|(k, _)| *k)
            .collect();
        for (key, target) in due {
            self.copy_pump(now_ms, key, target, dih, out);
        }
    }

    /// A copy's lock wait ended: granted, or its row vanished.
    pub(super) fn copy_wait_over(
        &mut self,
        token: WaitToken,
        now_ms: u64,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let Some((key, target)) = self.copy_waits.remove(&token) else {
            return;
        };
        let Some(scan) = self.copies.get_mut(&(key, target)) else {
            return;
        };
        let Some((_, row)) = scan.wait.take() else {
            return;
        };
        let held = self
            .frags
            .get(&key)
            .is_some_and(|e| e.frag.locks.holds(row, scan.owner).is_some());
        if held {
            scan.granted_row = Some(row);
        }
        // If not held, the row vanished: the scan looks at its id again.
        self.copy_pump(now_ms, key, target, dih, out);
    }

    /// Sends batches while the window and the rate allow.
    fn copy_pump(
        &mut self,
        now_ms: u64,
        key: FragKey,
        target: u16,
        _dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let batch_bytes_max = COPY_BATCH_BYTES.min(self.cfg.max_answer_bytes / 2).max(1);
        let rate = self.cfg.copy_bytes_per_sec;
        let late = self.cfg.faults.copy_since_one_epoch_late;
        loop {
            let Some(scan) = self.copies.get_mut(&(key, target)) else {
                return;
            };
            if scan.done_sending
                || scan.wait.is_some()
                || scan.unconfirmed >= COPY_WINDOW
                || now_ms < scan.next_send_ms
            {
                return;
            }
            let Some(entry) = self.frags.get_mut(&key) else {
                // The table was dropped: the copy ends (the president sees
                // the table gone).
                self.copies.remove(&(key, target));
                return;
            };
            let from_row = scan.next_row;
            let since = scan.since;
            // The fault: rows changed in the epoch right after the
            // target's are taken as unchanged too.
            let horizon = since + u64::from(late && since != 0);
            let ids_max = if since == 0 { u32::MAX } else { COPY_BATCH_IDS };
            let mut rows = Vec::new();
            let mut occupied = Vec::new();
            let mut bytes = 0usize;
            let mut waiting = None;
            while rows.len() < self.cfg.copy_batch_rows.max(1)
                && bytes < batch_bytes_max
                && scan.next_row - from_row < ids_max
            {
                let r = scan.next_row;
                if r >= entry.frag.id_end() {
                    break;
                }
                if entry.frag.is_free(r) {
                    scan.next_row += 1;
                    continue;
                }
                let have_lock = scan.granted_row == Some(r);
                // A row no transaction holds and unchanged since the
                // target's epoch: the target has it.
                if since != 0
                    && !have_lock
                    && !entry.frag.locks.is_locked(r)
                    && !entry.epochs.changed_after(r, horizon)
                {
                    set_bit(&mut occupied, r - from_row);
                    scan.stats.kept += 1;
                    scan.next_row += 1;
                    continue;
                }
                if !have_lock {
                    let token = self.next_token;
                    match entry
                        .frag
                        .locks
                        .acquire(r, scan.owner, RowLock::Shared, token)
                    {
                        LockOutcome::Granted => {}
                        LockOutcome::Waiting => {
                            self.next_token += 1;
                            waiting = Some((token, r));
                            break;
                        }
                    }
                }
                scan.granted_row = None;
                // The committed image: nobody else holds an exclusive
                // lock, so nothing is pending on the row.
                if since != 0 {
                    set_bit(&mut occupied, r - from_row);
                    if !entry.epochs.changed_after(r, horizon) {
                        // Its transaction only read it.
                        entry.frag.locks.release(r, scan.owner, &mut self.granted);
                        scan.stats.kept += 1;
                        scan.next_row += 1;
                        continue;
                    }
                }
                let (fixed, var) = entry.frag.row(r);
                bytes += 20 + fixed.len() + var.len();
                rows.push(CopyRow {
                    row: r,
                    epoch: entry.epochs.get(r),
                    fixed: fixed.to_vec(),
                    var: var.to_vec(),
                });
                entry.frag.locks.release(r, scan.owner, &mut self.granted);
                scan.next_row += 1;
            }
            let to_row = scan.next_row;
            if since != 0 {
                // Every id of the range has its bit (trailing free ids 0).
                occupied.resize((to_row - from_row).div_ceil(8) as usize, 0);
                bytes += occupied.len();
            }
            let last = waiting.is_none() && to_row >= entry.frag.id_end();
            if let Some((token, r)) = waiting {
                scan.wait = Some((token, r));
                self.copy_waits.insert(token, (key, target));
                if rows.is_empty() && to_row == from_row {
                    return;
                }
            }
            let seq = scan.seq;
            scan.seq += 1;
            scan.unconfirmed += 1;
            scan.done_sending = last;
            scan.stats.rows += rows.len() as u64;
            scan.stats.bytes += bytes as u64;
            if rate > 0 {
                scan.next_send_ms =
                    scan.began_ms + scan.stats.bytes.saturating_mul(1000).div_ceil(rate);
            }
            if last {
                // Commits this node remembers whose clients may not know
                // their outcome: the target holds their copied rows
                // without their records, and must be able to report them
                // if their coordinator fails (in pieces a frame holds).
                let markers: Vec<(TxnRef, u16, TransId, u64)> = self
                    .finished
                    .iter()
                    .flat_map(|f| f.commits())
                    .map(|f| (f.txn, f.api_node, f.trans, f.epoch))
                    .collect();
                for chunk in markers.chunks(COPY_MARKERS_PER_SIGNAL) {
                    out.push_back(BlockSignal::from(ClusterSignal::CopyMarkers {
                        to: target,
                        markers: chunk.to_vec(),
                    }));
                }
            }
            out.push_back(BlockSignal::from(ClusterSignal::CopyRows {
                to: target,
                table: key.0,
                frag: key.1,
                seq,
                from_row,
                to_row,
                id_end: entry.frag.id_end(),
                rows,
                occupied,
                last,
            }));
        }
    }

    /// Whether a copy of fragment `key` in progress from this node has
    /// already sent row id `row` (an operation on it now must reach the
    /// restarting replica after that copy).
    pub(super) fn copy_has_passed(&self, key: FragKey, row: u32) -> bool {
        row != crate::signal::ROW_NONE
            && self
                .copies
                .iter()
                .any(|(&(k, _), scan)| k == key && row < scan.next_row)
    }

    /// Ends the copies to `node` (it failed), giving back their locks.
    pub fn copies_to_failed(&mut self, failed: &[u16]) {
        let gone: Vec<(FragKey, u16)> = self
            .copies
            .keys()
            .filter(|(_, t)| failed.contains(t))
            .copied()
            .collect();
        for k in gone {
            self.end_copy(k);
        }
    }

    /// Ends one copy, giving back its locks.
    fn end_copy(&mut self, k: (FragKey, u16)) {
        if let Some(scan) = self.copies.remove(&k) {
            if let Some(entry) = self.frags.get_mut(&k.0) {
                if let Some((token, row)) = scan.wait {
                    entry
                        .frag
                        .locks
                        .cancel_wait(row, scan.owner, &mut self.granted);
                    // Granted already, with the grant not yet taken up:
                    // the scan holds it.
                    if entry.frag.locks.holds(row, scan.owner).is_some() {
                        entry.frag.locks.release(row, scan.owner, &mut self.granted);
                    }
                    self.copy_waits.remove(&token);
                }
                if let Some(row) = scan.granted_row {
                    entry.frag.locks.release(row, scan.owner, &mut self.granted);
                }
            }
        }
    }

    pub(super) fn drop_copies_of_table(&mut self, table: TableId) {
        self.copies.retain(|((t, _), _), _| *t != table);
        self.copy_waits.retain(|_, ((t, _), _)| *t != table);
    }

    /// Commit markers from a copy's source (see `ClusterSignal::CopyMarkers`).
    pub(super) fn copy_markers(&mut self, markers: &[(TxnRef, u16, TransId, u64)]) {
        for &(txn, api_node, trans, epoch) in markers {
            if !self.txns.contains_key(&txn) {
                self.remember_finished(txn, api_node, trans, true, epoch);
            }
        }
    }

    /// Rows and bytes copied into this node's replicas, and rows kept.
    pub fn copy_totals(&self) -> CopyStats {
        let mut t = CopyStats::default();
        for e in self.frags.values() {
            t.rows += e.copy_rows;
            t.bytes += e.copy_bytes;
            t.kept += e.copy_kept;
        }
        t
    }

    /// Rows and bytes copied into this node's replica of a fragment.
    pub fn copied_into(&self, table: TableId, frag: FragmentId) -> CopyStats {
        self.frags
            .get(&(table, frag))
            .map_or_else(CopyStats::default, |e| CopyStats {
                rows: e.copy_rows,
                bytes: e.copy_bytes,
                kept: e.copy_kept,
            })
    }
}

/// Sets bit `i` of a bitmap (low bit first), growing it as needed.
fn set_bit(bits: &mut Vec<u8>, i: u32) {
    let byte = (i / 8) as usize;
    if byte >= bits.len() {
        bits.resize(byte + 1, 0);
    }
    bits[byte] |= 1 << (i % 8);
}

/// Bit `i` of a bitmap (low bit first); false past its end.
pub(super) fn bit(bits: &[u8], i: u32) -> bool {
    bits.get((i / 8) as usize)
        .is_some_and(|b| b & (1 << (i % 8)) != 0)
}
