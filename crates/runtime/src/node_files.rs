//! A data node's files: its redo log and sysfile in its data dir
//! (docs/FILES.md), read back at start and written by a log writer thread
//! as the kernel's outputs say.
//!
//! The writer takes requests in order (write bytes at a log position, sync
//! through a position, record the durable epoch) and syncs once for every
//! sync request that queued up meanwhile (group commit). It answers each
//! sync through a channel and the event loop's waker. An error writing or
//! syncing fails the node: it is never retried or ignored (a failed fsync
//! may have dropped the data it was to make durable).

use mio::Waker;
use shoal_mgmd::dir_lock::DirLock;
use shoal_storage::redo::{read_log, LogEnd, Lsn, RedoEntry, REDO_BLOCK_BYTES};
use shoal_storage::sysfile::Sysfile;
use shoal_types::{ErrorCode, ShoalError};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::Arc;

pub const REDO_FILE: &str = "redo.log";
pub const SYSFILE: &str = "sysfile";
const LOCK_FILE: &str = "datanode.lock";

fn fail(detail: String) -> ShoalError {
    ShoalError::with_detail(ErrorCode::Internal, detail)
}

/// What the files held at start.
pub struct Recovered {
    pub entries: Vec<RedoEntry>,
    /// The durable epoch the sysfile recorded (0: none).
    pub durable: u64,
    /// Where the log goes on (a block boundary past its last record).
    pub log_end: Lsn,
    /// The sysfile's latest record, which the writer's records follow.
    pub sysfile: Option<Sysfile>,
    /// Bytes of log read.
    pub log_bytes: u64,
}

/// Opens the node's data dir: locks it, then reads the sysfile and the
/// redo log back. `initial`: delete them first (start empty). A log
/// damaged below the position its sysfile says was synced is not used:
/// it is moved aside, and the node restores no rows (it copies them from
/// live replicas; a cluster restart waits for a node holding the durable
/// epoch, and says so). A damaged sysfile is moved aside too; the log is
/// read without it.
pub fn open(dir: &Path, node_id: u16, initial: bool) -> Result<(DirLock, Recovered), ShoalError> {
    let lock = DirLock::acquire(dir, LOCK_FILE, &format!("data node {node_id}"))?;
    let redo_path = dir.join(REDO_FILE);
    let sys_path = dir.join(SYSFILE);
    if initial {
        for p in [&redo_path, &sys_path] {
            match std::fs::remove_file(p) {
                Ok(()) => eprintln!("data node {node_id}: --initial: deleted {}", p.display()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(fail(format!("cannot delete {}: {e}", p.display()))),
            }
        }
    }
    if initial {
        sync_dir(dir)?;
    }
    let sys_bytes = read_all(&sys_path)?;
    let sysfile = match Sysfile::read(&sys_bytes) {
        Ok(s) => s,
        Err(e) => {
            // The log carries its own checksums and can still be read; only
            // the durable epoch and the synced position are lost (a damaged
            // chunk is then taken for a torn tail).
            let aside = move_aside(&sys_path)?;
            eprintln!(
                "data node {node_id}: the sysfile {} fails its checksums ({e:?}); moved to {}; reading the redo log without it",
                sys_path.display(),
                aside.display()
            );
            None
        }
    };
    let bytes = read_all(&redo_path)?;
    let log = read_log(&bytes, 0);
    let synced = sysfile.map_or(0, |s| s.redo_synced);
    if let LogEnd::Corrupt { at, detail } = &log.end {
        if *at < synced {
            let aside = move_aside(&redo_path)?;
            eprintln!(
                "data node {node_id}: the redo log {} is damaged at byte {at}, below the {synced} bytes it synced ({detail}); moved to {} — this node restores nothing from its files and copies its rows from live replicas",
                redo_path.display(),
                aside.display()
            );
            // It still knows which epoch was durable: a restart of the
            // cluster will not form without a node that holds it.
            let durable = sysfile.map_or(0, |s| s.durable_epoch);
            return Ok((
                lock,
                Recovered {
                    durable,
                    sysfile,
                    ..empty()
                },
            ));
        }
    }
    let block = REDO_BLOCK_BYTES as u64;
    Ok((
        lock,
        Recovered {
            entries: log.entries,
            durable: sysfile.map_or(0, |s| s.durable_epoch),
            log_end: log.valid_end.div_ceil(block) * block,
            sysfile,
            log_bytes: bytes.len() as u64,
        },
    ))
}

fn empty() -> Recovered {
    Recovered {
        entries: Vec::new(),
        durable: 0,
        log_end: 0,
        sysfile: None,
        log_bytes: 0,
    }
}

/// Makes the directory's entries (files created, renamed, deleted)
/// durable.
fn sync_dir(dir: &Path) -> Result<(), ShoalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| fail(format!("cannot sync the directory {}: {e}", dir.display())))
}

fn read_all(path: &Path) -> Result<Vec<u8>, ShoalError> {
    match std::fs::read(path) {
        Ok(b) => Ok(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(fail(format!("cannot read {}: {e}", path.display()))),
    }
}

/// Renames a damaged file so nothing reads or overwrites it.
fn move_aside(path: &Path) -> Result<PathBuf, ShoalError> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut aside = path.as_os_str().to_owned();
    aside.push(format!(".damaged-{stamp}"));
    let aside = PathBuf::from(aside);
    match std::fs::rename(path, &aside) {
        Ok(()) => {
            if let Some(dir) = path.parent() {
                sync_dir(dir)?;
            }
            Ok(aside)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(aside),
        Err(e) => Err(fail(format!("cannot move {} aside: {e}", path.display()))),
    }
}

/// What the event loop asks of the writer.
enum Request {
    Write { lsn: Lsn, bytes: Vec<u8> },
    Sync { lsn: Lsn },
    Sysfile { durable_epoch: u64 },
}

/// What the writer tells the event loop.
pub enum Event {
    /// The log is synced through this position.
    Synced(Lsn),
    /// Writing or syncing failed: the node must stop.
    Failed(String),
}

/// The event loop's handle on the writer thread.
pub struct Writer {
    requests: Sender<Request>,
    pub events: Receiver<Event>,
}

impl Writer {
    /// Starts the writer on `dir`'s files; the log goes on at `log_end`.
    pub fn start(
        dir: &Path,
        node_id: u16,
        recovered: &Recovered,
        waker: Arc<Waker>,
    ) -> Result<Writer, ShoalError> {
        let open_rw = |name: &str| {
            let path = dir.join(name);
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| fail(format!("cannot open {}: {e}", path.display())))
        };
        let redo = open_rw(REDO_FILE)?;
        let sys = open_rw(SYSFILE)?;
        // Bytes past the last whole record (a torn tail, or a later block
        // a crash kept while losing an earlier one) go: the log goes on
        // from here, and a stale block further on must never be read as
        // part of it.
        redo.set_len(recovered.log_end)
            .and_then(|()| redo.sync_all())
            .map_err(|e| fail(format!("cannot cut the redo log at its end: {e}")))?;
        sync_dir(dir)?;
        let (requests, rx) = channel();
        let (tx, events) = channel();
        let mut state = WriterState {
            redo,
            sys,
            sysfile: recovered.sysfile.unwrap_or(Sysfile {
                seq: 0,
                durable_epoch: 0,
                redo_start: 0,
                redo_synced: 0,
            }),
            synced: recovered.log_end,
            written: recovered.log_end,
        };
        match recovered.sysfile {
            // A new data dir: record 0 first, synced, so a later torn
            // write of record 1 leaves a valid one.
            None => state
                .write_sysfile(state.sysfile)
                .map_err(|e| fail(format!("data node {node_id}: {e}")))?,
            // The log was moved aside or cut shorter than the sysfile says
            // it was synced: the new log is synced up to its start only.
            Some(s) if s.redo_synced > recovered.log_end => {
                let next = s.next(s.durable_epoch, 0, recovered.log_end);
                state
                    .write_sysfile(next)
                    .map_err(|e| fail(format!("data node {node_id}: {e}")))?;
            }
            Some(_) => {}
        }
        std::thread::Builder::new()
            .name(format!("redo-writer-{node_id}"))
            .spawn(move || state.run(rx, tx, waker))
            .map_err(|e| fail(format!("cannot start the log writer: {e}")))?;
        Ok(Writer { requests, events })
    }

    pub fn write(&self, lsn: Lsn, bytes: Vec<u8>) {
        let _ = self.requests.send(Request::Write { lsn, bytes });
    }

    pub fn sync(&self, lsn: Lsn) {
        let _ = self.requests.send(Request::Sync { lsn });
    }

    pub fn record_durable(&self, durable_epoch: u64) {
        let _ = self.requests.send(Request::Sysfile { durable_epoch });
    }
}

struct WriterState {
    redo: File,
    sys: File,
    sysfile: Sysfile,
    /// The log is written, and synced, up to here.
    written: Lsn,
    synced: Lsn,
}

impl WriterState {
    fn run(mut self, rx: Receiver<Request>, tx: Sender<Event>, waker: Arc<Waker>) {
        let tell = |e: Event| {
            let _ = tx.send(e);
            let _ = waker.wake();
        };
        while let Ok(first) = rx.recv() {
            // Everything queued now goes in one pass: one sync for all of
            // its sync requests (group commit).
            let mut batch = vec![first];
            loop {
                match rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => break,
                }
            }
            if let Err(why) = self.run_batch(batch, &tell) {
                tell(Event::Failed(why));
                return;
            }
        }
    }

    fn run_batch(&mut self, batch: Vec<Request>, tell: &impl Fn(Event)) -> Result<(), String> {
        let mut sync_to: Option<Lsn> = None;
        let mut durable: Option<u64> = None;
        for r in batch {
            match r {
                Request::Write { lsn, bytes } => {
                    self.redo
                        .write_all_at(&bytes, lsn)
                        .map_err(|e| format!("writing the redo log at byte {lsn}: {e}"))?;
                    self.written = self.written.max(lsn + bytes.len() as u64);
                }
                Request::Sync { lsn } => sync_to = Some(sync_to.map_or(lsn, |s| s.max(lsn))),
                Request::Sysfile { durable_epoch } => {
                    durable = Some(durable.map_or(durable_epoch, |d| d.max(durable_epoch)))
                }
            }
        }
        if let Some(lsn) = sync_to {
            self.redo
                .sync_data()
                .map_err(|e| format!("syncing the redo log (fdatasync): {e}"))?;
            self.synced = self.synced.max(lsn.min(self.written));
            tell(Event::Synced(lsn));
        }
        if let Some(epoch) = durable {
            let next = self.sysfile.next(epoch, 0, self.synced);
            self.write_sysfile(next)?;
        }
        Ok(())
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
