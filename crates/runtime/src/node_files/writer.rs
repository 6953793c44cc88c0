//! The log writer thread: carries out the kernel's file outputs in order —
//! redo writes into the log's files, syncs, checkpoint files, sysfile
//! records — and deletes what a recorded checkpoint leaves unused.
//!
//! It syncs once for every redo sync request that queued up meanwhile
//! (group commit), and answers each sync through a channel and the event
//! loop's waker. A failed sync fails the node: it is never retried or
//! ignored (a failed fsync may have dropped the data it was to make
//! durable). A full disk is different: nothing was lost, so a redo write
//! that finds no space is kept and tried again every
//! [`DISK_FULL_RETRY`], the node hears the disk is full (it refuses
//! writes meanwhile) and later that it has room again; a checkpoint that
//! finds no space is dropped (its file deleted) and the node starts
//! another later.

use super::{fail, lcp_ids, lcp_path, segment_path, segments, sync_dir, Recovered};
use super::{REDO_SEGMENT_BYTES, SYSFILE};
use mio::Waker;
use shoal_storage::redo::{segment_pieces, Lsn};
use shoal_storage::sysfile::{LcpChain, Sysfile, SYSFILE_SLOT_BYTES, SYSFILE_SLOT_STRIDE};
use shoal_types::ShoalError;
use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

/// How often a write that found the disk full is tried again.
const DISK_FULL_RETRY: Duration = Duration::from_millis(100);
/// Redo bytes that may wait for disk space (writes are refused meanwhile,
/// so they grow by about an end-of-epoch block per epoch); past this the
/// node stops rather than hold more in memory. Above the kernel's bound
/// on bytes handed over and not written (256 MB), so a disk that fills
/// while that much is queued refuses writes before it stops the node.
const BLOCKED_BYTES_MAX: usize = 512 << 20;

/// What the event loop asks of the writer.
enum Request {
    Write {
        lsn: Lsn,
        bytes: Vec<u8>,
    },
    Sync {
        lsn: Lsn,
    },
    Sysfile {
        durable_epoch: u64,
        history: u32,
    },
    LcpWrite {
        id: u64,
        offset: u64,
        bytes: Vec<u8>,
    },
    LcpSync {
        id: u64,
    },
    LcpRecord {
        chain: LcpChain,
        redo_start: Lsn,
    },
}

/// What the writer tells the event loop.
pub enum Event {
    /// The log is synced through this position.
    Synced(Lsn),
    /// Checkpoint `id`'s file is synced.
    LcpSynced(u64),
    /// Checkpoint `id` could not be written (the disk is full): dropped.
    LcpFailed { id: u64, why: String },
    /// The disk holding the log is full (`Some(why)`), or has room again.
    DiskFull(Option<String>),
    /// Writing or syncing failed: the node must stop.
    Failed(String),
}

/// The event loop's handle on the writer thread.
pub struct Writer {
    requests: Sender<Request>,
    pub events: Receiver<Event>,
    /// Bytes handed to the writer and not written yet (the queue between
    /// them is bounded through this: the kernel hears it every tick).
    backlog: Arc<AtomicU64>,
}

fn is_disk_full(e: &std::io::Error) -> bool {
    // ENOSPC, EDQUOT.
    matches!(e.raw_os_error(), Some(28) | Some(122)) || e.kind() == std::io::ErrorKind::StorageFull
}

fn open_rw(path: &Path, truncate: bool) -> Result<File, String> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(truncate)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))
}

impl Writer {
    /// Starts the writer on `dir`'s files as `recovered` found them: files
    /// the sysfile does not name go, the log is cut where it goes on, and
    /// a sysfile record saying so is written first.
    pub fn start(
        dir: &Path,
        node_id: u16,
        recovered: &Recovered,
        waker: Arc<Waker>,
    ) -> Result<Writer, ShoalError> {
        let named = |e: String| fail(format!("data node {node_id}: {e}"));
        let (valid_end, end) = (recovered.log_valid_end, recovered.log_end);
        // Bytes past the last whole record (a torn tail, or a later block
        // a crash kept while losing an earlier one) go: the log goes on
        // from the next block boundary, and nothing stale before or after
        // it may ever be read as part of it. So the file the log ends in
        // is cut at the last record's end and extended with zeros to the
        // boundary (the padding a sync writes), later files are deleted,
        // and every file kept is synced: a previous process may have
        // written bytes it never synced, which this start reads, restores
        // and now records as synced.
        for n in segments(dir)? {
            let path = segment_path(dir, n);
            let start = n * REDO_SEGMENT_BYTES;
            let unused = (n + 1) * REDO_SEGMENT_BYTES <= recovered.redo_start;
            if start >= end || unused {
                std::fs::remove_file(&path)
                    .map_err(|e| named(format!("cannot delete {}: {e}", path.display())))?;
                continue;
            }
            let f = open_rw(&path, false).map_err(named)?;
            let seg_end = start + REDO_SEGMENT_BYTES;
            let cut =
                |e: std::io::Error| named(format!("cannot cut {} at its end: {e}", path.display()));
            if valid_end < seg_end {
                f.set_len(valid_end.max(start) - start).map_err(cut)?;
                f.set_len(end.min(seg_end) - start).map_err(cut)?;
            }
            f.sync_all()
                .map_err(|e| named(format!("cannot sync {}: {e}", path.display())))?;
        }
        let chain = recovered.lcp.ids();
        for id in lcp_ids(dir)? {
            if !chain.contains(&id) {
                let path = lcp_path(dir, id);
                std::fs::remove_file(&path)
                    .map_err(|e| named(format!("cannot delete {}: {e}", path.display())))?;
            }
        }
        sync_dir(dir)?;
        let sys = open_rw(&dir.join(SYSFILE), false).map_err(named)?;
        reserve_sysfile(&sys).map_err(named)?;
        let base = recovered.sysfile.unwrap_or_else(Sysfile::empty);
        let mut state = WriterState {
            dir: dir.to_path_buf(),
            segments: BTreeMap::new(),
            new_files: false,
            sys,
            sysfile: base,
            synced: end,
            written: end,
            blocked: VecDeque::new(),
            deferred_sync: None,
            lcp_files: BTreeMap::new(),
            lcp_failed: None,
        };
        if recovered.sysfile.is_none() {
            // A new data dir: record 0 first, synced, so a later torn
            // write of record 1 leaves a valid one.
            state.write_sysfile(base).map_err(named)?;
        }
        // What this start restores from, and the log synced up to where it
        // goes on (it was cut and synced there above): one record, in the
        // slot after the newest valid one.
        let now = Sysfile {
            seq: base.seq + 1,
            durable_epoch: recovered.durable.max(base.durable_epoch),
            redo_start: recovered.redo_start,
            redo_synced: end,
            lcp: recovered.lcp,
            history: base.history,
        };
        state.write_sysfile(now).map_err(named)?;
        let (requests, rx) = channel();
        let (tx, events) = channel();
        let backlog = Arc::new(AtomicU64::new(0));
        let queued = Arc::clone(&backlog);
        std::thread::Builder::new()
            .name(format!("redo-writer-{node_id}"))
            .spawn(move || state.run(rx, tx, waker, queued))
            .map_err(|e| fail(format!("cannot start the log writer: {e}")))?;
        Ok(Writer {
            requests,
            events,
            backlog,
        })
    }

    /// Bytes handed over and not written yet.
    pub fn backlog(&self) -> u64 {
        self.backlog.load(Ordering::Relaxed)
    }

    pub fn write(&self, lsn: Lsn, bytes: Vec<u8>) {
        self.backlog
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let _ = self.requests.send(Request::Write { lsn, bytes });
    }

    pub fn sync(&self, lsn: Lsn) {
        let _ = self.requests.send(Request::Sync { lsn });
    }

    pub fn record_durable(&self, durable_epoch: u64, history: u32) {
        let _ = self.requests.send(Request::Sysfile {
            durable_epoch,
            history,
        });
    }

    pub fn lcp_write(&self, id: u64, offset: u64, bytes: Vec<u8>) {
        self.backlog
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let _ = self.requests.send(Request::LcpWrite { id, offset, bytes });
    }

    pub fn lcp_sync(&self, id: u64) {
        let _ = self.requests.send(Request::LcpSync { id });
    }

    pub fn lcp_record(&self, chain: LcpChain, redo_start: Lsn) {
        let _ = self.requests.send(Request::LcpRecord { chain, redo_start });
    }
}

struct WriterState {
    dir: PathBuf,
    /// The log's files open for writing, by number.
    segments: BTreeMap<u64, File>,
    /// A file was created since the directory was last synced.
    new_files: bool,
    sys: File,
    sysfile: Sysfile,
    /// The log is written, and synced, up to here.
    written: Lsn,
    synced: Lsn,
    /// Redo writes waiting for disk space, in order.
    blocked: VecDeque<(Lsn, Vec<u8>)>,
    /// A sync asked for while writes wait for space: done after them.
    deferred_sync: Option<Lsn>,
    /// Checkpoint files being written.
    lcp_files: BTreeMap<u64, File>,
    /// A checkpoint dropped for want of space: its later requests are
    /// ignored.
    lcp_failed: Option<u64>,
}

type Tell<'a> = &'a dyn Fn(Event);

impl WriterState {
    fn run(
        mut self,
        rx: Receiver<Request>,
        tx: Sender<Event>,
        waker: Arc<Waker>,
        backlog: Arc<AtomicU64>,
    ) {
        let tell = |e: Event| {
            let _ = tx.send(e);
            let _ = waker.wake();
        };
        loop {
            let first = if self.blocked.is_empty() {
                match rx.recv() {
                    Ok(r) => Some(r),
                    Err(_) => return,
                }
            } else {
                match rx.recv_timeout(DISK_FULL_RETRY) {
                    Ok(r) => Some(r),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            };
            // Everything queued now goes in one pass: one sync for all of
            // its sync requests (group commit).
            let mut batch: Vec<Request> = first.into_iter().collect();
            while let Ok(r) = rx.try_recv() {
                batch.push(r);
            }
            let bytes: u64 = batch
                .iter()
                .map(|r| match r {
                    Request::Write { bytes, .. } | Request::LcpWrite { bytes, .. } => {
                        bytes.len() as u64
                    }
                    _ => 0,
                })
                .sum();
            if let Err(why) = self.run_batch(batch, &tell) {
                tell(Event::Failed(why));
                return;
            }
            // Written (or, for redo waiting for disk space, held here:
            // bounded by `BLOCKED_BYTES_MAX`).
            backlog.fetch_sub(bytes, Ordering::Relaxed);
        }
    }

    fn run_batch(&mut self, batch: Vec<Request>, tell: Tell<'_>) -> Result<(), String> {
        let was_blocked = !self.blocked.is_empty();
        self.retry_blocked()?;
        let mut sync_to: Option<Lsn> = self.deferred_sync.take();
        let mut durable: Option<(u64, u32)> = None;
        for r in batch {
            match r {
                Request::Write { lsn, bytes } => {
                    if self.blocked.is_empty() {
                        self.write_redo(lsn, bytes)?;
                    } else {
                        self.blocked.push_back((lsn, bytes));
                    }
                }
                Request::Sync { lsn } => sync_to = Some(sync_to.map_or(lsn, |s| s.max(lsn))),
                Request::Sysfile {
                    durable_epoch,
                    history,
                } => {
                    // The newest: epochs of an earlier history (before a
                    // join) are not comparable with later ones.
                    durable = Some(match durable {
                        Some((d, h)) if h == history => (d.max(durable_epoch), h),
                        _ => (durable_epoch, history),
                    })
                }
                Request::LcpWrite { id, offset, bytes } => {
                    self.lcp_write(id, offset, &bytes, tell)?
                }
                Request::LcpSync { id } => self.lcp_sync(id, tell)?,
                Request::LcpRecord { chain, redo_start } => {
                    // Durable epochs asked for before it are recorded first
                    // (a checkpoint is recorded once its epochs are).
                    if let Some((epoch, history)) = durable.take() {
                        self.record_durable(epoch, history)?;
                    }
                    self.lcp_record(chain, redo_start)?;
                }
            }
        }
        if let Some(lsn) = sync_to {
            // While writes wait for space, what is before the first of
            // them is written: it is synced and said so.
            let reach = self.blocked.front().map_or(lsn, |&(b, _)| lsn.min(b));
            if reach > self.synced {
                self.sync_redo()?;
                self.synced = reach;
            }
            // Every request is answered (one for a position already synced
            // too), so the kernel never waits for a sync that happened.
            tell(Event::Synced(reach));
            if reach < lsn {
                self.deferred_sync = Some(lsn);
            }
        }
        let waiting: usize = self.blocked.iter().map(|(_, b)| b.len()).sum();
        if waiting > BLOCKED_BYTES_MAX {
            return Err(format!(
                "the disk holding {} stayed full while {} MB of redo log waited for space",
                self.dir.display(),
                waiting >> 20
            ));
        }
        if let Some((epoch, history)) = durable {
            self.record_durable(epoch, history)?;
        }
        match (was_blocked, self.blocked.front()) {
            (false, Some((lsn, _))) => tell(Event::DiskFull(Some(format!(
                "the disk holding {} is full: the redo log cannot grow past byte {lsn}",
                self.dir.display()
            )))),
            (true, None) => tell(Event::DiskFull(None)),
            _ => {}
        }
        Ok(())
    }

    /// Writes bytes at log position `lsn`, in the files they fall in; on
    /// a full disk the write waits (whole) for another try.
    fn write_redo(&mut self, lsn: Lsn, bytes: Vec<u8>) -> Result<(), String> {
        let pieces: Vec<(u64, u64, usize)> = segment_pieces(lsn, &bytes, REDO_SEGMENT_BYTES)
            .map(|(n, off, piece)| (n, off, piece.len()))
            .collect();
        let mut at = 0;
        for (n, off, len) in pieces {
            let file = match self.segments.entry(n) {
                std::collections::btree_map::Entry::Occupied(f) => f.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    let path = segment_path(&self.dir, n);
                    self.new_files |= !path.exists();
                    v.insert(open_rw(&path, false)?)
                }
            };
            if let Err(e) = file.write_all_at(&bytes[at..at + len], off) {
                if is_disk_full(&e) {
                    self.blocked.push_back((lsn, bytes));
                    return Ok(());
                }
                return Err(format!("writing the redo log at byte {lsn}: {e}"));
            }
            at += len;
        }
        self.written = self.written.max(lsn + bytes.len() as u64);
        Ok(())
    }

    /// Tries the writes that found the disk full again, in order.
    fn retry_blocked(&mut self) -> Result<(), String> {
        for (lsn, bytes) in std::mem::take(&mut self.blocked) {
            if self.blocked.is_empty() {
                self.write_redo(lsn, bytes)?;
            } else {
                self.blocked.push_back((lsn, bytes));
            }
        }
        Ok(())
    }

    fn sync_redo(&mut self) -> Result<(), String> {
        for (n, f) in &self.segments {
            f.sync_data()
                .map_err(|e| format!("syncing redo log file {n} (fdatasync): {e}"))?;
        }
        if std::mem::take(&mut self.new_files) {
            sync_dir(&self.dir).map_err(|e| e.to_string())?;
        }
        // Files wholly written and synced are not written again.
        let current = self.written / REDO_SEGMENT_BYTES;
        self.segments.retain(|&n, _| n >= current);
        Ok(())
    }

    fn lcp_write(
        &mut self,
        id: u64,
        offset: u64,
        bytes: &[u8],
        tell: Tell<'_>,
    ) -> Result<(), String> {
        if self.lcp_failed == Some(id) {
            return Ok(());
        }
        let path = lcp_path(&self.dir, id);
        if !self.lcp_files.contains_key(&id) {
            // A new checkpoint's file starts empty (one of the same id left
            // by an earlier start is not part of it); files of checkpoints
            // dropped before their sync are closed.
            self.lcp_files.retain(|&k, _| k > id);
            self.lcp_files.insert(id, open_rw(&path, true)?);
        }
        let Some(file) = self.lcp_files.get(&id) else {
            return Ok(());
        };
        match file.write_all_at(bytes, offset) {
            Ok(()) => Ok(()),
            Err(e) if is_disk_full(&e) => self.drop_lcp(
                id,
                format!("the disk is full writing {}: {e}", path.display()),
                tell,
            ),
            Err(e) => Err(format!("writing checkpoint {}: {e}", path.display())),
        }
    }

    fn drop_lcp(&mut self, id: u64, why: String, tell: Tell<'_>) -> Result<(), String> {
        self.lcp_failed = Some(id);
        self.lcp_files.remove(&id);
        let path = lcp_path(&self.dir, id);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot delete {}: {e}", path.display())),
        }
        tell(Event::LcpFailed { id, why });
        Ok(())
    }

    fn lcp_sync(&mut self, id: u64, tell: Tell<'_>) -> Result<(), String> {
        if self.lcp_failed == Some(id) {
            return Ok(());
        }
        let Some(file) = self.lcp_files.remove(&id) else {
            return Err(format!("checkpoint {id} synced before it was written"));
        };
        file.sync_data()
            .map_err(|e| format!("syncing checkpoint {id} (fdatasync): {e}"))?;
        sync_dir(&self.dir).map_err(|e| e.to_string())?;
        tell(Event::LcpSynced(id));
        Ok(())
    }

    fn record_durable(&mut self, epoch: u64, history: u32) -> Result<(), String> {
        let next = self.sysfile.with_durable(epoch, self.synced, history);
        self.write_sysfile(next)
    }

    /// Records the checkpoints a restart reads from now, then deletes the
    /// checkpoint and log files that leaves unused.
    fn lcp_record(&mut self, chain: LcpChain, redo_start: Lsn) -> Result<(), String> {
        let next = self.sysfile.with_lcp(chain, redo_start);
        self.write_sysfile(next)?;
        let dir = self.dir.clone();
        let listed = |r: Result<Vec<u64>, ShoalError>| r.map_err(|e| e.to_string());
        for id in listed(lcp_ids(&dir))? {
            if id < chain.first {
                remove(&lcp_path(&dir, id))?;
            }
        }
        for n in listed(segments(&dir))? {
            if (n + 1) * REDO_SEGMENT_BYTES <= redo_start {
                self.segments.remove(&n);
                remove(&segment_path(&dir, n))?;
            }
        }
        sync_dir(&dir).map_err(|e| e.to_string())
    }

    fn write_sysfile(&mut self, record: Sysfile) -> Result<(), String> {
        self.sys
            .write_all_at(&record.encode(), record.offset() as u64)
            .map_err(|e| format!("writing the sysfile: {e}"))?;
        self.sys
            .sync_data()
            .map_err(|e| format!("syncing the sysfile (fdatasync): {e}"))?;
        self.sysfile = record;
        Ok(())
    }
}

/// Gives the sysfile its blocks (both slots) now, written with zeros (a
/// blank slot holds no record): every later write of it is in place, so a
/// full disk can never fail one while the node runs — only this start,
/// with a message saying so.
fn reserve_sysfile(sys: &File) -> Result<(), String> {
    let want = (SYSFILE_SLOT_STRIDE + SYSFILE_SLOT_BYTES) as u64;
    let len = sys
        .metadata()
        .map_err(|e| format!("reading the sysfile's size: {e}"))?
        .len();
    if len >= want {
        return Ok(());
    }
    let zeros = vec![0u8; (want - len) as usize];
    let full = |e: &std::io::Error| {
        if is_disk_full(e) {
            " (the disk is full: free some space and start the node again)"
        } else {
            ""
        }
    };
    sys.write_all_at(&zeros, len)
        .map_err(|e| format!("reserving the sysfile's {want} bytes: {e}{}", full(&e)))?;
    sys.sync_data()
        .map_err(|e| format!("syncing the sysfile (fdatasync): {e}"))
}

fn remove(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot delete {}: {e}", path.display())),
    }
}
