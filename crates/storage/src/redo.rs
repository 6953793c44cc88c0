//! The redo log's format, without I/O: records of committed changes
//! packed into checksummed chunks in 4 KiB blocks, a writer that hands out
//! the bytes to write (the runtime writes and syncs them, the simulator
//! gives them to its faulty disk), and a reader that finds where a log
//! ends — cleanly, torn by a crash, or corrupt. Byte by byte in
//! docs/FILES.md.
//!
//! Why chunks in blocks: a record may be larger than a block (a 30,000
//! byte row), and a block once synced must never be written again (a
//! crash during a rewrite could tear data already acknowledged as
//! durable). So a record is cut into chunks that never cross a block
//! boundary, and each sync pads to the next boundary: the next records
//! start in a fresh block.
//!
//! Why the position is in every checksum: log files are reused. A chunk
//! left from an earlier pass over the same bytes is well formed but was
//! written at another log position, so its checksum does not match where
//! the reader finds it, and the log ends there.

use crate::crc32c::{crc32c, crc32c_update};
use std::sync::Arc;

/// A position in the redo log: bytes since the log began.
pub type Lsn = u64;

/// Blocks never written twice once synced.
pub const REDO_BLOCK_BYTES: usize = 4096;

/// crc32c (4), payload length (2), kind (1), reserved (1).
const CHUNK_HEADER_BYTES: usize = 8;

/// Payload bytes one chunk holds at most.
const CHUNK_PAYLOAD_MAX: usize = REDO_BLOCK_BYTES - CHUNK_HEADER_BYTES;

/// How a chunk relates to its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkKind {
    /// The whole record.
    Full = 1,
    /// Its first piece; `Middle` ones and a `Last` follow.
    First = 2,
    Middle = 3,
    Last = 4,
}

impl ChunkKind {
    fn from_u8(b: u8) -> Option<ChunkKind> {
        Some(match b {
            1 => ChunkKind::Full,
            2 => ChunkKind::First,
            3 => ChunkKind::Middle,
            4 => ChunkKind::Last,
            _ => return None,
        })
    }
}

/// What a record did to a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedoKind {
    /// Inserted or updated: `attrs` is the after-image of the changed
    /// columns (an attribute list).
    Write = 1,
    /// Deleted.
    Delete = 2,
    /// Every record of epochs up to `epoch` is before this one (written
    /// when the cluster saves `epoch`): the log holds that epoch whole.
    /// No row fields.
    EpochEnd = 3,
    /// The node's rows were brought to the end of `epoch` here (a
    /// cluster restart): records before this one of a later epoch never
    /// happened. No row fields.
    Restored = 4,
    /// Every earlier record is superseded: the `Write` records stamped 0
    /// that follow are all the node's rows (logged once a restarting node
    /// copied them from live replicas), among the changes logged
    /// meanwhile; the log can restore `epoch` and later ones (`u64::MAX`:
    /// none, until a `SnapshotDone` says which). No row fields.
    Snapshot = 5,
    /// The first record of a local checkpoint file (never in the redo
    /// log): `epoch` is the checkpoint's id, `frag` 1 if it is a full one
    /// (every row) and 0 if partial (the rows changed since the previous
    /// one, and deletes). No other row fields.
    LcpBegin = 6,
    /// The last record of a local checkpoint file, `epoch` its id: a file
    /// without it is not a checkpoint. No row fields.
    LcpEnd = 7,
    /// The snapshot begun at the last `Snapshot` marker (of epoch
    /// `u64::MAX`) is whole: no row it wrote holds a change of a later
    /// epoch than `epoch`, and the log can restore `epoch` and later ones.
    /// No row fields.
    SnapshotDone = 8,
}

impl RedoKind {
    fn from_u8(b: u8) -> Option<RedoKind> {
        Some(match b {
            1 => RedoKind::Write,
            2 => RedoKind::Delete,
            3 => RedoKind::EpochEnd,
            4 => RedoKind::Restored,
            5 => RedoKind::Snapshot,
            6 => RedoKind::LcpBegin,
            7 => RedoKind::LcpEnd,
            8 => RedoKind::SnapshotDone,
            _ => return None,
        })
    }

    /// A marker about the log or checkpoint itself, not a row change.
    pub fn is_marker(self) -> bool {
        !matches!(self, RedoKind::Write | RedoKind::Delete)
    }
}

/// The pieces of a write of `bytes` at log position `lsn` when the log is
/// kept in files of `segment_bytes` each (file `n` holds positions
/// `n * segment_bytes ..`): (file number, offset in it, bytes).
pub fn segment_pieces(
    lsn: Lsn,
    bytes: &[u8],
    segment_bytes: u64,
) -> impl Iterator<Item = (u64, u64, &[u8])> {
    assert!(
        segment_bytes > 0 && segment_bytes.is_multiple_of(REDO_BLOCK_BYTES as u64),
        "segments hold whole blocks"
    );
    let mut at = lsn;
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (seg, off) = (at / segment_bytes, at % segment_bytes);
        let take = rest.len().min((segment_bytes - off) as usize);
        let (piece, tail) = rest.split_at(take);
        rest = tail;
        at += take as u64;
        Some((seg, off, piece))
    })
}

/// One committed change of one row, as logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedoRecord<'a> {
    pub kind: RedoKind,
    /// The epoch the change's transaction committed in.
    pub epoch: u64,
    pub table: u32,
    pub frag: u32,
    /// The row's id (the same on every replica).
    pub row: u32,
    /// The encoded primary key.
    pub key: &'a [u8],
    /// `Write`: the attribute list; `Delete`: empty.
    pub attrs: &'a [u8],
}

impl RedoRecord<'_> {
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.kind as u8);
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(&self.table.to_le_bytes());
        out.extend_from_slice(&self.frag.to_le_bytes());
        out.extend_from_slice(&self.row.to_le_bytes());
        out.extend_from_slice(&(self.key.len() as u16).to_le_bytes());
        out.extend_from_slice(self.key);
        out.extend_from_slice(&(self.attrs.len() as u32).to_le_bytes());
        out.extend_from_slice(self.attrs);
    }

    /// Parses a record's bytes; `None` if they are not one record.
    fn decode(b: &[u8]) -> Option<RedoRecord<'_>> {
        let (&kind, rest) = b.split_first()?;
        let kind = RedoKind::from_u8(kind)?;
        let u32_at = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(rest.get(at..at + 4)?.try_into().ok()?))
        };
        let epoch = u64::from_le_bytes(rest.get(0..8)?.try_into().ok()?);
        let (table, frag, row) = (u32_at(8)?, u32_at(12)?, u32_at(16)?);
        let key_len = usize::from(u16::from_le_bytes(rest.get(20..22)?.try_into().ok()?));
        let key = rest.get(22..22 + key_len)?;
        let attrs_len = u32_at(22 + key_len)? as usize;
        let start = 26 + key_len;
        let attrs = rest.get(start..start.checked_add(attrs_len)?)?;
        if start + attrs_len != rest.len() || (kind != RedoKind::Write && !attrs.is_empty()) {
            return None;
        }
        Some(RedoRecord {
            kind,
            epoch,
            table,
            frag,
            row,
            key,
            attrs,
        })
    }
}

/// A record as read back: in place in the bytes read (a record in one
/// chunk, most of them), or its own copy (one that spanned blocks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedoEntry {
    /// Where the record's first chunk starts.
    pub lsn: Lsn,
    bytes: EntryBytes,
}

#[derive(Clone)]
enum EntryBytes {
    Owned(Vec<u8>),
    Shared {
        buf: Arc<Vec<u8>>,
        start: usize,
        len: usize,
    },
}

/// Equal if the bytes are, wherever they are kept.
impl PartialEq for EntryBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for EntryBytes {}

/// The record's bytes, never the whole buffer they sit in.
impl std::fmt::Debug for EntryBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl EntryBytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            EntryBytes::Owned(v) => v,
            EntryBytes::Shared { buf, start, len } => &buf[*start..*start + *len],
        }
    }
}

impl RedoEntry {
    /// The record (checked when it was read).
    pub fn record(&self) -> RedoRecord<'_> {
        RedoRecord::decode(self.bytes.as_slice()).expect("checked when read")
    }

    /// The same record in its own allocation (one kept long must not keep
    /// the whole buffer it was read into).
    pub fn to_owned_entry(&self) -> RedoEntry {
        RedoEntry {
            lsn: self.lsn,
            bytes: EntryBytes::Owned(self.bytes.as_slice().to_vec()),
        }
    }

    /// The record's kind, without parsing the rest (checked when read).
    pub fn kind(&self) -> RedoKind {
        RedoKind::from_u8(self.bytes.as_slice()[0]).expect("checked when read")
    }

    /// The record's epoch, without parsing the rest.
    pub fn epoch(&self) -> u64 {
        let b = self.bytes.as_slice();
        u64::from_le_bytes(b[1..9].try_into().expect("checked when read"))
    }
}

/// The checksum of a chunk at `lsn`.
fn chunk_crc(lsn: Lsn, kind: u8, payload: &[u8]) -> u32 {
    let mut head = [0u8; 12];
    head[..8].copy_from_slice(&lsn.to_le_bytes());
    head[8..10].copy_from_slice(&(payload.len() as u16).to_le_bytes());
    head[10] = kind;
    crc32c_update(crc32c(&head), payload)
}

/// Appends records as chunks and hands out the bytes to write. Sans-IO:
/// the driver writes [`RedoWriter::take`]'s bytes at their position,
/// syncs, and only then counts the records in them as durable.
#[derive(Debug)]
pub struct RedoWriter {
    /// The position of `pending[0]`; everything before it was handed out.
    pending_lsn: Lsn,
    pending: Vec<u8>,
    scratch: Vec<u8>,
}

impl RedoWriter {
    /// A writer continuing the log at `start`, a block boundary (where the
    /// reader found the log's end, rounded up).
    pub fn new(start: Lsn) -> RedoWriter {
        assert_eq!(
            start % REDO_BLOCK_BYTES as u64,
            0,
            "a log continues at a block boundary"
        );
        RedoWriter {
            pending_lsn: start,
            pending: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// The position after the last record appended.
    pub fn end(&self) -> Lsn {
        self.pending_lsn + self.pending.len() as u64
    }

    /// Bytes appended and not yet handed out.
    pub fn pending_bytes(&self) -> usize {
        self.pending.len()
    }

    /// Appends one record; returns the position after it (it is durable
    /// once the log is synced past that).
    pub fn append(&mut self, rec: &RedoRecord) -> Lsn {
        assert!(
            rec.key.len() <= usize::from(u16::MAX),
            "a key of {} bytes",
            rec.key.len()
        );
        assert!(
            rec.kind == RedoKind::Write || rec.attrs.is_empty(),
            "only a write carries attributes"
        );
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        rec.encode(&mut scratch);
        let mut rest: &[u8] = &scratch;
        let mut first = true;
        loop {
            let room = self.room_in_block();
            let take = rest.len().min(room);
            let last = take == rest.len();
            let kind = match (first, last) {
                (true, true) => ChunkKind::Full,
                (true, false) => ChunkKind::First,
                (false, false) => ChunkKind::Middle,
                (false, true) => ChunkKind::Last,
            };
            let lsn = self.end();
            let (piece, tail) = rest.split_at(take);
            let crc = chunk_crc(lsn, kind as u8, piece);
            self.pending.extend_from_slice(&crc.to_le_bytes());
            self.pending.extend_from_slice(&(take as u16).to_le_bytes());
            self.pending.push(kind as u8);
            self.pending.push(0);
            self.pending.extend_from_slice(piece);
            rest = tail;
            first = false;
            if last {
                self.scratch = scratch;
                return self.end();
            }
        }
    }

    /// Payload bytes a chunk starting now may hold; pads the block first
    /// if less than a header and one byte is left in it.
    fn room_in_block(&mut self) -> usize {
        let left = REDO_BLOCK_BYTES - (self.end() % REDO_BLOCK_BYTES as u64) as usize;
        if left <= CHUNK_HEADER_BYTES {
            self.pending.resize(self.pending.len() + left, 0);
            return CHUNK_PAYLOAD_MAX;
        }
        left - CHUNK_HEADER_BYTES
    }

    /// Pads to the next block boundary and hands out everything appended
    /// since the last call, with its position: write it there and sync.
    /// The next records start in a fresh block, so no synced block is
    /// ever written again. `None` if nothing was appended.
    pub fn take(&mut self) -> Option<(Lsn, Vec<u8>)> {
        if self.pending.is_empty() {
            return None;
        }
        let used = (self.end() % REDO_BLOCK_BYTES as u64) as usize;
        if used != 0 {
            self.pending
                .resize(self.pending.len() + REDO_BLOCK_BYTES - used, 0);
        }
        let lsn = self.pending_lsn;
        let bytes = std::mem::take(&mut self.pending);
        self.pending_lsn += bytes.len() as u64;
        Some((lsn, bytes))
    }
}

/// How reading a log ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogEnd {
    /// At the end of the bytes, or at zeros after the last record.
    Clean,
    /// At a chunk that is not valid here, and nothing valid after it: what
    /// a crash during a write leaves (the unsynced tail is not durable).
    Torn,
    /// At a chunk that is not valid here while a valid one follows in a
    /// later block. Below the position the log was last synced to, that is
    /// damage to durable data; above it, a crash that kept a later block
    /// of an unsynced write but not an earlier one (disks may reorder
    /// writes). The caller tells the two apart by the synced position it
    /// recorded; records after `at` are never used either way.
    Corrupt { at: Lsn, detail: String },
}

/// What a log holds: its whole records from `base` on, where the valid
/// part ends (a writer continues at the next block boundary), and why.
#[derive(Debug)]
pub struct ReadLog {
    pub entries: Vec<RedoEntry>,
    /// The position after the last whole record.
    pub valid_end: Lsn,
    pub end: LogEnd,
}

/// Reads the log kept in files of `segment_bytes` each (file `n` holds
/// positions `n * segment_bytes ..`) from `start`, a block boundary:
/// file after file while each is whole. `append(n, buf)` appends file
/// `n`'s bytes to `buf` (false: it does not exist); `size_hint` is about
/// how many bytes that will be (one allocation, not one per doubling).
pub fn read_segments(
    start: Lsn,
    segment_bytes: u64,
    size_hint: usize,
    mut append: impl FnMut(u64, &mut Vec<u8>) -> bool,
) -> ReadLog {
    let mut buf = Vec::with_capacity(size_hint);
    let mut n = start / segment_bytes;
    loop {
        let before = buf.len();
        if !append(n, &mut buf) {
            break;
        }
        let got = (buf.len() - before) as u64;
        if got >= segment_bytes {
            buf.truncate(before + segment_bytes as usize);
        } else {
            break;
        }
        n += 1;
    }
    // The first file holds positions before `start` too.
    let skip = ((start % segment_bytes) as usize).min(buf.len());
    let buf = Arc::new(buf);
    read_log_in(&buf[skip..], start, 0, Some((&buf, skip)))
}

/// Why a log read back lost bytes it had synced through `synced`, if it
/// did: damage below that position, or an end before it (a file missing
/// or cut short).
pub fn lost_synced_bytes(read: &ReadLog, synced: Lsn) -> Option<String> {
    if let LogEnd::Corrupt { at, detail } = &read.end {
        if *at < synced {
            return Some(format!(
                "damaged at byte {at}, below the {synced} bytes it synced ({detail})"
            ));
        }
    }
    let block = REDO_BLOCK_BYTES as u64;
    let end = read.valid_end.div_ceil(block) * block;
    (end < synced).then(|| {
        format!("it ends at byte {end}, short of the {synced} bytes it synced (a file missing or cut short)")
    })
}

/// Reads the log whose bytes start at position `base` (a block boundary).
pub fn read_log(bytes: &[u8], base: Lsn) -> ReadLog {
    read_log_in(bytes, base, 0, None)
}

/// [`read_log`] of bytes read into `buf`: the records in one chunk stay
/// in it (no copy per record).
pub fn read_log_shared(buf: Arc<Vec<u8>>, base: Lsn) -> ReadLog {
    read_log_in(buf.as_slice(), base, 0, Some((&buf, 0)))
}

/// [`read_log_shared`] from position `from` on (where a record begins,
/// or padding: the end of an earlier read's `valid_end`), `buf` holding
/// the bytes from `base` (a block boundary at or before it). For reading
/// a file piece by piece.
pub fn read_log_shared_from(buf: Arc<Vec<u8>>, base: Lsn, from: Lsn) -> ReadLog {
    assert!(from >= base, "reading from before the bytes");
    let skip = ((from - base) as usize).min(buf.len());
    read_log_in(buf.as_slice(), base, skip, Some((&buf, 0)))
}

/// Reads `bytes`; with `shared`, they are `buf[offset..]` and records in
/// one chunk stay in `buf`.
fn read_log_in(
    bytes: &[u8],
    base: Lsn,
    from: usize,
    shared: Option<(&Arc<Vec<u8>>, usize)>,
) -> ReadLog {
    assert_eq!(
        base % REDO_BLOCK_BYTES as u64,
        0,
        "logs start at a block boundary"
    );
    let mut entries = Vec::new();
    let mut record: Option<(Lsn, Vec<u8>)> = None;
    let mut valid_end = base + from as u64;
    let mut pos = from;
    let end = loop {
        let left_in_block = REDO_BLOCK_BYTES - pos % REDO_BLOCK_BYTES;
        if left_in_block <= CHUNK_HEADER_BYTES {
            pos += left_in_block; // padding
            continue;
        }
        if pos + CHUNK_HEADER_BYTES > bytes.len() {
            break if record.is_some() {
                LogEnd::Torn
            } else {
                LogEnd::Clean
            };
        }
        let h = &bytes[pos..pos + CHUNK_HEADER_BYTES];
        let crc = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes"));
        let len = usize::from(u16::from_le_bytes([h[4], h[5]]));
        let lsn = base + pos as u64;
        if h.iter().all(|&b| b == 0) {
            // Zeros: the padding of a sync, or never written. A sync pads
            // to a block boundary, so what follows starts a block.
            if record.is_some() {
                break LogEnd::Torn;
            }
            let next_block = pos + left_in_block;
            if valid_chunk_from(bytes, base, next_block) {
                pos = next_block;
                continue;
            }
            // Nothing valid right after: the end, unless valid chunks come
            // later (then the block after this one is damaged).
            break match damaged(bytes, base, next_block, "a block that holds no valid chunk") {
                LogEnd::Torn => LogEnd::Clean,
                other => other,
            };
        }
        let payload = bytes.get(pos + CHUNK_HEADER_BYTES..pos + CHUNK_HEADER_BYTES + len);
        let good = len <= left_in_block - CHUNK_HEADER_BYTES
            && h[7] == 0
            && payload.is_some_and(|p| chunk_crc(lsn, h[6], p) == crc);
        let kind = ChunkKind::from_u8(h[6]);
        let (Some(payload), Some(kind), true) = (payload, kind, good) else {
            break damaged(
                bytes,
                base,
                pos,
                "a chunk whose checksum, length or kind is wrong",
            );
        };
        let ok = match (kind, &mut record) {
            (ChunkKind::Full, None) => {
                let start = pos + CHUNK_HEADER_BYTES;
                entries.push((
                    lsn,
                    match shared {
                        Some((buf, offset)) => EntryBytes::Shared {
                            buf: Arc::clone(buf),
                            start: offset + start,
                            len: payload.len(),
                        },
                        None => EntryBytes::Owned(payload.to_vec()),
                    },
                ));
                true
            }
            (ChunkKind::First, None) => {
                record = Some((lsn, payload.to_vec()));
                true
            }
            (ChunkKind::Middle, Some((_, buf))) => {
                buf.extend_from_slice(payload);
                true
            }
            (ChunkKind::Last, Some(_)) => {
                let (at, mut buf) = record.take().expect("matched");
                buf.extend_from_slice(payload);
                entries.push((at, EntryBytes::Owned(buf)));
                true
            }
            _ => false,
        };
        if !ok {
            break damaged(bytes, base, pos, "chunks out of order");
        }
        pos += CHUNK_HEADER_BYTES + len;
        if record.is_none() {
            valid_end = base + pos as u64;
        }
    };
    let mut out = Vec::with_capacity(entries.len());
    for (lsn, bytes) in entries {
        if RedoRecord::decode(bytes.as_slice()).is_none() {
            // Checksummed yet malformed: written so by a bug, or a
            // collision; nothing from here on is trusted.
            return ReadLog {
                entries: out,
                valid_end: lsn,
                end: LogEnd::Corrupt {
                    at: lsn,
                    detail: "a record that does not parse".into(),
                },
            };
        }
        out.push(RedoEntry { lsn, bytes });
    }
    ReadLog {
        entries: out,
        valid_end,
        end,
    }
}

/// A bad chunk at `pos`: torn if nothing valid follows, else corrupt.
fn damaged(bytes: &[u8], base: Lsn, pos: usize, what: &str) -> LogEnd {
    let mut next = pos - pos % REDO_BLOCK_BYTES + REDO_BLOCK_BYTES;
    while next < bytes.len() {
        if valid_chunk_from(bytes, base, next) {
            return LogEnd::Corrupt {
                at: base + pos as u64,
                detail: format!(
                    "{what} at position {}, with valid chunks after it",
                    base + pos as u64
                ),
            };
        }
        next += REDO_BLOCK_BYTES;
    }
    LogEnd::Torn
}

/// Whether a valid chunk starts at `pos` (a block boundary).
fn valid_chunk_from(bytes: &[u8], base: Lsn, pos: usize) -> bool {
    let Some(h) = bytes.get(pos..pos + CHUNK_HEADER_BYTES) else {
        return false;
    };
    let len = usize::from(u16::from_le_bytes([h[4], h[5]]));
    let crc = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes"));
    len <= CHUNK_PAYLOAD_MAX
        && ChunkKind::from_u8(h[6]).is_some()
        && bytes
            .get(pos + CHUNK_HEADER_BYTES..pos + CHUNK_HEADER_BYTES + len)
            .is_some_and(|p| chunk_crc(base + pos as u64, h[6], p) == crc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(kind: RedoKind, n: u32, size: usize) -> (RedoKind, u32, Vec<u8>, Vec<u8>) {
        let key = n.to_le_bytes().to_vec();
        let attrs = if kind == RedoKind::Write {
            (0..size).map(|i| (i as u32 * 31 + n) as u8).collect()
        } else {
            Vec::new()
        };
        (kind, n, key, attrs)
    }

    fn as_record(r: &(RedoKind, u32, Vec<u8>, Vec<u8>)) -> RedoRecord<'_> {
        RedoRecord {
            kind: r.0,
            epoch: u64::from(r.1) / 3,
            table: 7,
            frag: r.1 % 4,
            row: r.1,
            key: &r.2,
            attrs: &r.3,
        }
    }

    /// Writes `records` with a sync after each group of `per_sync`; the
    /// log's bytes from position 0.
    fn write(records: &[(RedoKind, u32, Vec<u8>, Vec<u8>)], per_sync: usize) -> Vec<u8> {
        let mut w = RedoWriter::new(0);
        let mut disk = Vec::new();
        for (i, r) in records.iter().enumerate() {
            w.append(&as_record(r));
            if (i + 1) % per_sync.max(1) == 0 {
                let (lsn, bytes) = w.take().unwrap();
                assert_eq!(lsn as usize, disk.len());
                disk.extend_from_slice(&bytes);
            }
        }
        if let Some((_, bytes)) = w.take() {
            disk.extend_from_slice(&bytes);
        }
        disk
    }

    #[test]
    fn a_log_in_files_reads_back_from_any_block() {
        let seg = 2 * REDO_BLOCK_BYTES as u64;
        let records: Vec<_> = (0..40)
            .map(|n| rec(RedoKind::Write, n, 300 + n as usize * 37))
            .collect();
        let log = write(&records, 3);
        let mut files: Vec<Vec<u8>> = Vec::new();
        for (n, off, piece) in segment_pieces(0, &log, seg) {
            if files.len() <= n as usize {
                files.resize(n as usize + 1, Vec::new());
            }
            let f = &mut files[n as usize];
            f.resize(off as usize, 0);
            f.extend_from_slice(piece);
        }
        for start_block in 0..(log.len() / REDO_BLOCK_BYTES) {
            let start = (start_block * REDO_BLOCK_BYTES) as u64;
            let whole = read_log(&log[start as usize..], start);
            let pieces = read_segments(start, seg, 0, |n, buf| match files.get(n as usize) {
                Some(f) => {
                    buf.extend_from_slice(f);
                    true
                }
                None => false,
            });
            assert_eq!(pieces.entries, whole.entries, "from block {start_block}");
            assert_eq!(pieces.valid_end, whole.valid_end);
        }
    }

    #[test]
    fn a_write_is_cut_at_segment_boundaries() {
        let seg = 2 * REDO_BLOCK_BYTES as u64;
        let bytes: Vec<u8> = (0..5 * REDO_BLOCK_BYTES).map(|i| i as u8).collect();
        let pieces: Vec<_> = segment_pieces(REDO_BLOCK_BYTES as u64, &bytes, seg)
            .map(|(n, off, b)| (n, off, b.len()))
            .collect();
        let block = REDO_BLOCK_BYTES;
        assert_eq!(
            pieces,
            vec![
                (0, block as u64, block),
                (1, 0, 2 * block),
                (2, 0, 2 * block)
            ]
        );
    }

    #[test]
    fn records_of_every_size_come_back_in_order() {
        let records: Vec<_> = (0..60)
            .map(|n| {
                let kind = if n % 5 == 4 {
                    RedoKind::Delete
                } else {
                    RedoKind::Write
                };
                rec(kind, n, [0, 10, 4_000, 4_088, 30_000][n as usize % 5])
            })
            .collect();
        let disk = write(&records, 7);
        assert_eq!(disk.len() % REDO_BLOCK_BYTES, 0);
        let log = read_log(&disk, 0);
        assert_eq!(log.end, LogEnd::Clean);
        let got: Vec<RedoRecord> = log.entries.iter().map(RedoEntry::record).collect();
        let want: Vec<RedoRecord> = records.iter().map(as_record).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_torn_tail_ends_the_log_and_a_damaged_middle_is_corrupt() {
        let records: Vec<_> = (0..40).map(|n| rec(RedoKind::Write, n, 900)).collect();
        let disk = write(&records, 10);
        // Torn: the last block written only in part.
        let mut torn = disk.clone();
        // The last sync wrote three blocks; the last two never arrived.
        let cut = torn.len() - 2 * REDO_BLOCK_BYTES;
        torn[cut..].fill(0);
        let log = read_log(&torn, 0);
        assert!(
            matches!(log.end, LogEnd::Torn | LogEnd::Clean),
            "{:?}",
            log.end
        );
        assert!(log.entries.len() < 40 && log.entries.len() > 30);
        for (i, e) in log.entries.iter().enumerate() {
            assert_eq!(e.record(), as_record(&records[i]));
        }
        // Corrupt: one byte flipped in the first block, valid blocks after.
        let mut bad = disk.clone();
        bad[100] ^= 0x40;
        let log = read_log(&bad, 0);
        assert!(matches!(log.end, LogEnd::Corrupt { .. }), "{:?}", log.end);
        assert!(log.entries.len() < 5);
    }

    #[test]
    fn chunks_written_at_another_position_are_not_taken() {
        // The same bytes read as if they were at another place of a
        // reused file: nothing is valid there.
        let records: Vec<_> = (0..5).map(|n| rec(RedoKind::Write, n, 100)).collect();
        let disk = write(&records, 5);
        let log = read_log(&disk, REDO_BLOCK_BYTES as u64 * 8);
        assert!(log.entries.is_empty());
        assert_eq!(log.end, LogEnd::Torn);
    }

    #[test]
    fn a_writer_continues_where_the_reader_ended() {
        let first: Vec<_> = (0..3).map(|n| rec(RedoKind::Write, n, 50)).collect();
        let disk = write(&first, 1);
        let log = read_log(&disk, 0);
        let start = log.valid_end.div_ceil(REDO_BLOCK_BYTES as u64) * REDO_BLOCK_BYTES as u64;
        let mut w = RedoWriter::new(start);
        let more = rec(RedoKind::Delete, 9, 0);
        w.append(&as_record(&more));
        let (lsn, bytes) = w.take().unwrap();
        let mut all = disk.clone();
        all.resize(lsn as usize, 0);
        all.extend_from_slice(&bytes);
        let log = read_log(&all, 0);
        assert_eq!(log.end, LogEnd::Clean);
        assert_eq!(log.entries.len(), 4);
        assert_eq!(log.entries[3].record(), as_record(&more));
    }

    proptest! {
        /// Whatever a crash leaves (a prefix of the bytes handed out, the
        /// rest zeros or garbage), reading never panics and returns a
        /// prefix of the records written, each whole and equal.
        #[test]
        fn any_damage_yields_a_prefix_of_the_records(
            sizes in proptest::collection::vec(0usize..9_000, 1..30),
            per_sync in 1usize..6,
            keep in 0.0f64..1.0,
            garbage in proptest::collection::vec(any::<u8>(), 0..200),
            flip in proptest::option::of((any::<usize>(), 1u8..=255)),
        ) {
            let records: Vec<_> = sizes.iter().enumerate()
                .map(|(n, &s)| rec(RedoKind::Write, n as u32, s)).collect();
            let mut disk = write(&records, per_sync);
            let cut = (disk.len() as f64 * keep) as usize;
            disk.truncate(cut);
            disk.extend_from_slice(&garbage);
            if let Some((at, x)) = flip {
                if !disk.is_empty() {
                    let at = at % disk.len();
                    disk[at] ^= x;
                }
            }
            let log = read_log(&disk, 0);
            prop_assert!(log.entries.len() <= records.len());
            for (i, e) in log.entries.iter().enumerate() {
                prop_assert_eq!(e.record(), as_record(&records[i]));
            }
        }
    }
}
