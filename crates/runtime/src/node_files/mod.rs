//! A data node's files in its data dir (docs/FILES.md): the redo log, in
//! files of [`REDO_SEGMENT_BYTES`] (`redo-NNNNNNNN.log`, file n holding log
//! positions n × that size on), the local checkpoints
//! (`lcp-NNNNNNNN.ckpt`) and the sysfile. Read back at start here; written
//! by the log writer thread (`writer`) as the kernel's outputs say.
//!
//! What a restart reads is what the sysfile names: the chain of
//! checkpoints, then the log from `redo_start`. Files it does not name are
//! left from before (a checkpoint written only in part, log files a
//! checkpoint made unused) and go. Damage to what it names — a checkpoint
//! not whole, log bytes it synced that are gone or fail their checksums,
//! a sysfile neither of whose slots is valid — means the node cannot
//! trust its files: they are moved aside (named in its log) and it
//! restores nothing, copying its rows from live replicas instead (a
//! cluster restart waits for a node holding the durable epoch, and says
//! so).

mod lcp_reader;
mod writer;

pub use lcp_reader::LcpReader;
pub use writer::{Event, Writer};

use shoal_mgmd::dir_lock::DirLock;
use shoal_storage::redo::{
    lost_synced_bytes, read_segments, segment_pieces, Lsn, RedoEntry, REDO_BLOCK_BYTES,
};
use shoal_storage::sysfile::{LcpChain, Sysfile};
use shoal_types::{ErrorCode, ShoalError};
use std::fs::File;
use std::path::{Path, PathBuf};

pub const SYSFILE: &str = "sysfile";
/// The single redo log file of data dirs written before the log was kept
/// in pieces: converted at start.
const OLD_REDO_FILE: &str = "redo.log";
const LOCK_FILE: &str = "datanode.lock";
/// Bytes of one redo log file: checkpoints free the log a file at a time.
pub const REDO_SEGMENT_BYTES: u64 = 4 << 20;

pub(crate) fn fail(detail: String) -> ShoalError {
    ShoalError::with_detail(ErrorCode::Internal, detail)
}

pub fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("redo-{n:08}.log"))
}

pub fn lcp_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("lcp-{id:08}.ckpt"))
}

/// The numbers of the files in `dir` named `{prefix}NNNNNNNN{suffix}`,
/// ascending.
pub(crate) fn numbered(dir: &Path, prefix: &str, suffix: &str) -> Result<Vec<u64>, ShoalError> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| fail(format!("cannot list {}: {e}", dir.display())))?;
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(|e| fail(format!("cannot list {}: {e}", dir.display())))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(n) = name
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(suffix))
            .and_then(|n| n.parse::<u64>().ok())
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

pub(crate) fn segments(dir: &Path) -> Result<Vec<u64>, ShoalError> {
    numbered(dir, "redo-", ".log")
}

pub(crate) fn lcp_ids(dir: &Path) -> Result<Vec<u64>, ShoalError> {
    numbered(dir, "lcp-", ".ckpt")
}

/// What the files held at start.
pub struct Recovered {
    /// The checkpoints a restart reads (empty: none), and their files
    /// (read by an [`LcpReader`] while the rows are restored).
    pub lcp: LcpChain,
    pub lcp_files: Vec<(u64, PathBuf)>,
    /// Where the log was read from.
    pub redo_start: Lsn,
    pub entries: Vec<RedoEntry>,
    /// The durable epoch the sysfile recorded (0: none).
    pub durable: u64,
    /// Where the log's last whole record ends, and where it goes on (the
    /// block boundary at or after that).
    pub log_valid_end: Lsn,
    pub log_end: Lsn,
    /// The sysfile's latest record, which the writer's records follow.
    pub sysfile: Option<Sysfile>,
    /// Bytes read: of log, of checkpoints.
    pub log_bytes: u64,
    pub lcp_bytes: u64,
}

/// Opens the node's data dir: locks it, then reads the sysfile, the
/// checkpoints and the redo log it names. `initial`: delete them first
/// (start empty).
pub fn open(dir: &Path, node_id: u16, initial: bool) -> Result<(DirLock, Recovered), ShoalError> {
    let lock = DirLock::acquire(dir, LOCK_FILE, &format!("data node {node_id}"))?;
    if initial {
        let mut doomed = vec![dir.join(SYSFILE), dir.join(OLD_REDO_FILE)];
        doomed.extend(segments(dir)?.into_iter().map(|n| segment_path(dir, n)));
        doomed.extend(lcp_ids(dir)?.into_iter().map(|id| lcp_path(dir, id)));
        let mut deleted = 0;
        for p in &doomed {
            match std::fs::remove_file(p) {
                Ok(()) => deleted += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(fail(format!("cannot delete {}: {e}", p.display()))),
            }
        }
        if deleted > 0 {
            eprintln!(
                "data node {node_id}: --initial: deleted its {deleted} files (sysfile, redo log, checkpoints) in {}",
                dir.display()
            );
        }
        sync_dir(dir)?;
    }
    convert_old_log(dir, node_id)?;
    let sys_path = dir.join(SYSFILE);
    let sysfile = match Sysfile::read(&read_all(&sys_path)?) {
        Ok(s) => s,
        Err(e) => {
            // Without it, which checkpoints and which part of the log hold
            // the rows is unknown.
            let aside = move_aside(&sys_path)?;
            let moved = move_all_aside(dir)?;
            eprintln!(
                "data node {node_id}: the sysfile {} fails its checksums ({e:?}); moved to {}, with its redo log and checkpoints ({moved} files) — this node restores nothing from its files and copies its rows from live replicas",
                sys_path.display(),
                aside.display()
            );
            return Ok((lock, empty(0, None)));
        }
    };
    // A new data dir (or one never recorded): no checkpoint; the log, if
    // any, from its start.
    let sys = sysfile.unwrap_or_else(Sysfile::empty);
    let recovered = read_back(dir, node_id, sys, sysfile)?;
    Ok((lock, recovered))
}

fn read_back(
    dir: &Path,
    node_id: u16,
    sys: Sysfile,
    recorded: Option<Sysfile>,
) -> Result<Recovered, ShoalError> {
    let damaged = |what: String| -> Result<Recovered, ShoalError> {
        let moved = move_all_aside(dir)?;
        eprintln!(
            "data node {node_id}: {what}; its redo log and checkpoints ({moved} files) are moved aside (named *.damaged-*) — this node restores nothing from its files and copies its rows from live replicas"
        );
        // It still knows which epoch was durable: a restart of the cluster
        // will not form without a node that holds it.
        Ok(empty(sys.durable_epoch, recorded))
    };
    // The checkpoints are read while they are applied (a damaged one
    // found then is handled as here, by the caller); a missing one now.
    let mut lcp_files = Vec::new();
    let mut lcp_bytes = 0;
    for id in sys.lcp.ids() {
        let path = lcp_path(dir, id);
        match std::fs::metadata(&path) {
            Ok(m) => lcp_bytes += m.len(),
            Err(e) => {
                return damaged(format!(
                    "its checkpoint {} cannot be used: {e}",
                    path.display()
                ))
            }
        }
        lcp_files.push((id, path));
    }
    let mut log_bytes = 0;
    let mut read_error = None;
    // One buffer for the whole log: its files' sizes, summed.
    let first = sys.redo_start / REDO_SEGMENT_BYTES;
    let size_hint: u64 = segments(dir)?
        .into_iter()
        .filter(|&n| n >= first)
        .filter_map(|n| std::fs::metadata(segment_path(dir, n)).ok())
        .map(|m| m.len())
        .sum();
    let log = read_segments(
        sys.redo_start,
        REDO_SEGMENT_BYTES,
        size_hint as usize,
        |n, buf| {
            let path = segment_path(dir, n);
            let read = File::open(&path).and_then(|mut f| {
                use std::io::Read;
                f.read_to_end(buf)
            });
            match read {
                Ok(got) => {
                    log_bytes += got as u64;
                    true
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
                Err(e) => {
                    read_error = Some(format!("cannot read {}: {e}", path.display()));
                    false
                }
            }
        },
    );
    if let Some(e) = read_error {
        return Err(fail(e));
    }
    if let Some(why) = lost_synced_bytes(&log, sys.redo_synced) {
        return damaged(format!(
            "its redo log in {} lost bytes it had synced: {why}",
            dir.display()
        ));
    }
    let block = REDO_BLOCK_BYTES as u64;
    Ok(Recovered {
        lcp: sys.lcp,
        lcp_files,
        redo_start: sys.redo_start,
        entries: log.entries,
        durable: sys.durable_epoch,
        log_valid_end: log.valid_end,
        log_end: log.valid_end.div_ceil(block) * block,
        sysfile: recorded,
        log_bytes,
        lcp_bytes,
    })
}

/// A checkpoint file turned out damaged while the rows were restored:
/// every log and checkpoint file is moved aside (as [`open`] does for
/// damage it finds), and the node restores nothing.
pub fn damaged_while_restoring(
    dir: &Path,
    node_id: u16,
    what: &str,
    recovered: &Recovered,
) -> Result<Recovered, ShoalError> {
    let moved = move_all_aside(dir)?;
    eprintln!(
        "data node {node_id}: {what}; its redo log and checkpoints ({moved} files) are moved aside (named *.damaged-*) — this node restores nothing from its files and copies its rows from live replicas"
    );
    Ok(empty(recovered.durable, recovered.sysfile))
}

/// Files that restore nothing: the log starts over at 0.
fn empty(durable: u64, sysfile: Option<Sysfile>) -> Recovered {
    Recovered {
        lcp: LcpChain::default(),
        lcp_files: Vec::new(),
        redo_start: 0,
        entries: Vec::new(),
        durable,
        log_valid_end: 0,
        log_end: 0,
        sysfile,
        log_bytes: 0,
        lcp_bytes: 0,
    }
}

/// A data dir from before the log was kept in pieces: its one log file
/// becomes the pieces (positions are unchanged).
fn convert_old_log(dir: &Path, node_id: u16) -> Result<(), ShoalError> {
    let old = dir.join(OLD_REDO_FILE);
    let bytes = match std::fs::read(&old) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(fail(format!("cannot read {}: {e}", old.display()))),
    };
    for (n, off, piece) in segment_pieces(0, &bytes, REDO_SEGMENT_BYTES) {
        let path = segment_path(dir, n);
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| fail(format!("cannot create {}: {e}", path.display())))?;
        use std::os::unix::fs::FileExt;
        f.write_all_at(piece, off)
            .and_then(|()| f.sync_all())
            .map_err(|e| fail(format!("cannot write {}: {e}", path.display())))?;
    }
    std::fs::remove_file(&old)
        .map_err(|e| fail(format!("cannot delete {}: {e}", old.display())))?;
    sync_dir(dir)?;
    eprintln!(
        "data node {node_id}: converted its redo log {} ({} bytes) into files of {} MiB",
        old.display(),
        bytes.len(),
        REDO_SEGMENT_BYTES >> 20
    );
    Ok(())
}

/// Makes the directory's entries (files created, renamed, deleted)
/// durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), ShoalError> {
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

/// Moves every log and checkpoint file aside; returns how many.
fn move_all_aside(dir: &Path) -> Result<usize, ShoalError> {
    let mut paths: Vec<PathBuf> = segments(dir)?
        .into_iter()
        .map(|n| segment_path(dir, n))
        .collect();
    paths.extend(lcp_ids(dir)?.into_iter().map(|id| lcp_path(dir, id)));
    for p in &paths {
        move_aside(p)?;
    }
    Ok(paths.len())
}
