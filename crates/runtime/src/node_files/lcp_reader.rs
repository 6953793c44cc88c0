//! Reading the chain of checkpoint files at start, piece by piece, on a
//! thread of its own: it reads, checks the checksums and parses while the
//! node applies the pieces before (two cores at work), and at most
//! [`PIECES_IN_FLIGHT`] pieces of about [`PIECE_BYTES`] each are held at
//! once — a restart needs memory for its rows, not for its files too.
//!
//! The pieces' buffers go back to the reader once applied and are read
//! into again: fresh memory costs a page fault per 4 KiB, and giving it
//! back costs every core a TLB flush.
//!
//! With each piece go zeroed row-store pages for up to as many bytes of
//! rows, faulted in here ([`fault_pages_while_busy`]), so the thread
//! applying the rows stops less for the kernel's faults and zeroing. Only
//! while that thread is busy: the reader faults pages in while the pieces
//! it read wait for the applier, and sends a piece as soon as there is
//! room for it. So the two threads share the faults when the files come
//! from memory (the reader faulting every page would make it the slower
//! one), and the applier takes them all when the disk is the bound (its
//! thread waits for pieces anyway). Memory outside
//! `data_memory` while restoring: the piece buffers (up to
//! `PIECES_IN_FLIGHT + 1` of ~8 MiB), the pages travelling with them (as
//! many bytes again), and at most 16 MiB of spare pages kept by the node
//! (`shoal_storage::Memory::give_zeroed_pages`): about 70 MiB. Pages a
//! piece does not use (rows with var parts, older images of rows a newer
//! checkpoint holds, which the restore skips, past the 16 MiB kept) are
//! freed.
//!
//! A piece ends at any byte; a record cut by it is read again with the
//! next piece (parsing starts over at the block holding its beginning,
//! records already handed over are skipped). A file is whole when its
//! first record is its begin record, its last its end record, and it has
//! no damage: anything else is an error naming the file, and the node
//! then restores nothing from its files (pieces before may have been
//! applied: the caller builds the node again).

use shoal_kernel::lqh::LcpPiece;
use shoal_storage::redo::{
    read_log_shared_from, LogEnd, Lsn, RedoEntry, RedoKind, REDO_BLOCK_BYTES,
};
use shoal_storage::PAGE_BYTES;
use std::io::Read;
use std::path::PathBuf;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender, TrySendError};
use std::sync::Arc;

/// Bytes read from a file per piece.
pub const PIECE_BYTES: usize = 8 << 20;
/// Pieces read ahead of the one being applied.
pub const PIECES_IN_FLIGHT: usize = 2;

/// Room for what a piece keeps of the one before (a record cut in two).
const CARRY_ROOM: usize = 256 * 1024;

/// A piece (its records, the file bytes read for it, the buffer they
/// point into, and zeroed pages for its rows) or why a file cannot be
/// used.
type Piece = Result<(Vec<RedoEntry>, u64, Arc<Vec<u8>>, Vec<Box<[u8]>>), String>;

/// A zeroed row-store page, written to once per 4 KiB so the kernel maps
/// (faults in and zeroes) its memory here, on the reader's thread, not on
/// the thread applying the rows (see
/// [`shoal_storage::Memory::give_zeroed_pages`]).
fn faulted_page() -> Box<[u8]> {
    let mut page = vec![0u8; PAGE_BYTES].into_boxed_slice();
    for at in (0..PAGE_BYTES).step_by(4096) {
        // An opaque zero: a store the compiler cannot drop as writing
        // what a zeroed allocation holds already.
        page[at] = std::hint::black_box(0);
    }
    page
}

/// Pages faulted in per look at whether the applier took a piece.
const PAGES_PER_TRY: usize = 8;

/// Where pieces go: the channel to the applier (a test's script).
trait PieceSink {
    fn try_send(&self, sent: Sent) -> Result<(), TrySendError<Sent>>;
    /// Waits for room; false if the applier is gone.
    fn send(&self, sent: Sent) -> bool;
}

impl PieceSink for SyncSender<Sent> {
    fn try_send(&self, sent: Sent) -> Result<(), TrySendError<Sent>> {
        SyncSender::try_send(self, sent)
    }

    fn send(&self, sent: Sent) -> bool {
        SyncSender::send(self, sent).is_ok()
    }
}

/// Sends `piece` to the applier; while the channel is full (the applier
/// is busy with the pieces before), faults in pages for the piece's rows
/// (up to its bytes) instead of waiting. False if the applier is gone.
fn fault_pages_while_busy(tx: &impl PieceSink, piece: Piece) -> bool {
    let mut sent = Some(piece);
    loop {
        let Some(piece) = sent.take() else {
            return true;
        };
        match tx.try_send(Some(piece)) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(Some(Ok((entries, bytes, buf, mut pages))))) => {
                if pages.len() * PAGE_BYTES >= bytes as usize {
                    return tx.send(Some(Ok((entries, bytes, buf, pages))));
                }
                pages.extend((0..PAGES_PER_TRY).map(|_| faulted_page()));
                sent = Some(Ok((entries, bytes, buf, pages)));
            }
            Err(TrySendError::Full(other)) => return tx.send(other),
        }
    }
}

/// What the reading thread sends: a piece, or (`None`) that every file
/// was read — so a thread that died early is not taken for the end.
type Sent = Option<Piece>;

/// The reading thread's end; pieces come out of [`LcpReader::next`].
pub struct LcpReader {
    rx: Receiver<Sent>,
    /// Buffers back to the reader.
    free: Sender<Vec<u8>>,
    /// The last piece's buffer: free once its records are dropped.
    lent: Option<Arc<Vec<u8>>>,
    failed: bool,
}

impl LcpReader {
    /// Starts reading `files` (checkpoint id, path), given oldest first
    /// as the sysfile names them and read newest first, as the restore
    /// takes them (`shoal_kernel::lqh::LcpPieces`).
    pub fn start(files: Vec<(u64, PathBuf)>) -> LcpReader {
        let (tx, rx) = sync_channel(PIECES_IN_FLIGHT);
        let (free, free_rx) = channel();
        let spawned = std::thread::Builder::new()
            .name("lcp-reader".into())
            .spawn(move || {
                let mut buffers = || {
                    free_rx
                        .try_recv()
                        .unwrap_or_else(|_| Vec::with_capacity(PIECE_BYTES + CARRY_ROOM))
                };
                for (id, path) in files.into_iter().rev() {
                    let ok = read_file(id, &path, &mut buffers, &mut |piece| {
                        fault_pages_while_busy(&tx, piece)
                    });
                    if !ok {
                        return; // an error was sent, or the node stopped listening
                    }
                }
                let _ = tx.send(None);
            });
        let rx = match spawned {
            Ok(_) => rx,
            Err(e) => {
                let (tx, rx) = sync_channel(1);
                let _ = tx.send(Some(Err(format!(
                    "cannot start the checkpoint reader: {e}"
                ))));
                rx
            }
        };
        LcpReader {
            rx,
            free,
            lent: None,
            failed: false,
        }
    }

    /// The next piece; `Ok(None)` once every file is read.
    pub fn next(&mut self) -> Result<Option<LcpPiece>, String> {
        if self.failed {
            return Ok(None);
        }
        // The piece before is applied: its records are gone.
        if let Some(Ok(buf)) = self.lent.take().map(Arc::try_unwrap) {
            let _ = self.free.send(buf);
        }
        match self.rx.recv() {
            Ok(Some(Ok((records, bytes, buf, zeroed_pages)))) => {
                self.lent = Some(buf);
                Ok(Some(LcpPiece {
                    records,
                    bytes,
                    zeroed_pages,
                }))
            }
            Ok(Some(Err(why))) => {
                self.failed = true;
                Err(why)
            }
            Ok(None) => {
                self.failed = true; // nothing more comes
                Ok(None)
            }
            Err(_) => {
                self.failed = true;
                Err("the checkpoint reader thread stopped before reading every file".into())
            }
        }
    }
}

/// Reads one checkpoint file, handing out its pieces; false once an error
/// was handed out or `send` refused.
fn read_file(
    id: u64,
    path: &PathBuf,
    buffers: &mut dyn FnMut() -> Vec<u8>,
    send: &mut dyn FnMut(Piece) -> bool,
) -> bool {
    let fail = |send: &mut dyn FnMut(Piece) -> bool, why: String| {
        send(Err(format!(
            "its checkpoint {} cannot be used: {why}",
            path.display()
        )));
        false
    };
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return fail(send, format!("cannot open it: {e}")),
    };
    let block = REDO_BLOCK_BYTES as u64;
    // Where the next buffer begins in the file (a block boundary); the
    // last buffer and from where in it its bytes are read again; where the
    // records not handed out yet begin.
    let mut base: Lsn = 0;
    let mut last: Option<(Arc<Vec<u8>>, usize)> = None;
    let mut handed_out_to: Lsn = 0;
    let mut began = false;
    let mut ended = false;
    loop {
        let mut buf = buffers();
        buf.clear();
        if let Some((prev, from)) = last.take() {
            buf.extend_from_slice(&prev[from..]);
        }
        let carried = buf.len();
        if carried > 2 * PIECE_BYTES {
            return fail(
                send,
                format!("no whole record in {carried} bytes from byte {base}"),
            );
        }
        buf.reserve(PIECE_BYTES);
        let fresh = match (&mut file).take(PIECE_BYTES as u64).read_to_end(&mut buf) {
            Ok(n) => n,
            Err(e) => return fail(send, format!("cannot read it: {e}")),
        };
        let eof = fresh < PIECE_BYTES;
        let buf = Arc::new(buf);
        let read = read_log_shared_from(Arc::clone(&buf), base, handed_out_to);
        match &read.end {
            LogEnd::Corrupt { at, detail } => {
                return fail(send, format!("damaged at byte {at}: {detail}"))
            }
            LogEnd::Torn if eof => {
                return fail(
                    send,
                    "it ends inside a record (written only in part)".into(),
                )
            }
            _ => {}
        }
        let mut entries = Vec::with_capacity(read.entries.len());
        for e in read.entries {
            if ended {
                return fail(send, "records follow its end record".into());
            }
            match e.kind() {
                // The begin record names the checkpoint.
                RedoKind::LcpBegin if !began && e.epoch() == id => began = true,
                RedoKind::LcpEnd if began && e.epoch() == id => ended = true,
                _ if !began => {
                    return fail(
                        send,
                        "it does not begin with its checkpoint's begin record".into(),
                    )
                }
                kind if kind.is_marker() => {
                    return fail(send, format!("a {kind:?} record inside it"))
                }
                _ => {}
            }
            entries.push(e);
        }
        if eof {
            if !ended {
                return fail(
                    send,
                    "it does not end with its end record (written only in part)".into(),
                );
            }
            return send(Ok((entries, fresh as u64, buf, Vec::new())));
        }
        if !send(Ok((entries, fresh as u64, Arc::clone(&buf), Vec::new()))) {
            return false;
        }
        // Parse again from where the records not handed out yet begin
        // (the bytes kept from the block that holds that position).
        handed_out_to = read.valid_end;
        let next_base = read.valid_end / block * block;
        last = Some((buf, (next_base - base) as usize));
        base = next_base;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_storage::redo::{read_log, RedoRecord, RedoWriter};

    /// A checkpoint file of `rows` rows of `size` bytes, flushed (padded
    /// to a block) every `flush_every` rows.
    fn lcp_file(id: u64, rows: u32, size: usize, flush_every: u32) -> Vec<u8> {
        let mut w = RedoWriter::new(0);
        let mut bytes = Vec::new();
        let marker = |kind| RedoRecord {
            kind,
            epoch: id,
            table: 0,
            frag: 1,
            row: 0,
            key: &[],
            attrs: &[],
        };
        w.append(&marker(RedoKind::LcpBegin));
        let image = vec![7u8; size];
        for row in 0..rows {
            w.append(&RedoRecord {
                kind: RedoKind::Write,
                epoch: 0,
                table: 1,
                frag: 0,
                row,
                key: &image[..8],
                attrs: &image,
            });
            if row % flush_every == flush_every - 1 {
                bytes.extend(w.take().expect("bytes").1);
            }
        }
        w.append(&marker(RedoKind::LcpEnd));
        bytes.extend(w.take().expect("bytes").1);
        bytes
    }

    fn read_all_pieces(path: &PathBuf, id: u64) -> Result<(Vec<RedoEntry>, u64, usize), String> {
        let mut got = Vec::new();
        let mut bytes = 0;
        let mut pieces = 0;
        let mut err = None;
        read_file(id, path, &mut Vec::new, &mut |p| match p {
            Ok((e, b, _, pages)) => {
                // Pages are added on the way to the applier, if it is busy.
                assert!(pages.is_empty());
                got.extend(e);
                bytes += b;
                pieces += 1;
                true
            }
            Err(why) => {
                err = Some(why);
                false
            }
        });
        match err {
            Some(why) => Err(why),
            None => Ok((got, bytes, pieces)),
        }
    }

    #[test]
    fn pieces_give_every_record_once_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Rows of 3,000 bytes (records cut across blocks and pieces),
        // flushed now and then (padding inside the file).
        let bytes = lcp_file(5, 7000, 3000, 97);
        assert!(bytes.len() > 2 * PIECE_BYTES, "{} bytes", bytes.len());
        let path = dir.path().join("lcp.ckpt");
        std::fs::write(&path, &bytes).expect("write");
        let whole = read_log(&bytes, 0).entries;
        let (got, total, pieces) = read_all_pieces(&path, 5).expect("whole");
        assert!(pieces >= 3);
        assert_eq!(total, bytes.len() as u64);
        assert_eq!(got.len(), whole.len());
        for (a, b) in got.iter().zip(&whole) {
            assert_eq!(
                (a.lsn, a.record().row, a.kind()),
                (b.lsn, b.record().row, b.kind())
            );
        }
        // The same through the reader thread, twice over (buffers given
        // back and read into again), one piece at a time.
        let mut reader = LcpReader::start(vec![(5, path.clone()), (5, path.clone())]);
        let mut rows = Vec::new();
        while let Some(piece) = reader.next().expect("whole") {
            rows.extend(
                piece
                    .records
                    .iter()
                    .map(|e| (e.lsn, e.record().row, e.record().attrs.to_vec())),
            );
        }
        assert_eq!(rows.len(), 2 * whole.len());
        for (got, want) in rows.iter().zip(whole.iter().chain(&whole)) {
            assert_eq!(
                got,
                &(want.lsn, want.record().row, want.record().attrs.to_vec())
            );
        }
    }

    /// The sysfile names a chain oldest first; the reader hands it over
    /// newest first, as the restore takes it.
    #[test]
    fn a_chain_is_read_newest_file_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut files = Vec::new();
        for id in [3, 4, 5] {
            let path = dir.path().join(format!("lcp-{id}.ckpt"));
            std::fs::write(&path, lcp_file(id, 10, 100, 4)).expect("write");
            files.push((id, path));
        }
        let mut reader = LcpReader::start(files);
        let mut begins = Vec::new();
        while let Some(piece) = reader.next().expect("whole") {
            begins.extend(
                piece
                    .records
                    .iter()
                    .filter(|e| e.kind() == RedoKind::LcpBegin)
                    .map(RedoEntry::epoch),
            );
        }
        assert_eq!(begins, [5, 4, 3]);
    }

    /// A channel that is full for its first `full` tries, then takes
    /// pieces; it keeps what it was sent.
    struct Script {
        full: std::cell::Cell<u32>,
        got: std::cell::RefCell<Vec<Sent>>,
    }

    impl PieceSink for Script {
        fn try_send(&self, sent: Sent) -> Result<(), TrySendError<Sent>> {
            match self.full.get() {
                0 => {
                    self.got.borrow_mut().push(sent);
                    Ok(())
                }
                n => {
                    self.full.set(n - 1);
                    Err(TrySendError::Full(sent))
                }
            }
        }

        fn send(&self, sent: Sent) -> bool {
            self.full.set(0);
            self.got.borrow_mut().push(sent);
            true
        }
    }

    fn pages_sent(full: u32, bytes: usize) -> usize {
        let script = Script {
            full: std::cell::Cell::new(full),
            got: Default::default(),
        };
        let piece = Ok((Vec::new(), bytes as u64, Arc::new(Vec::new()), Vec::new()));
        assert!(fault_pages_while_busy(&script, piece));
        let mut got = script.got.into_inner();
        assert_eq!(got.len(), 1);
        match got.pop() {
            Some(Some(Ok((_, _, _, pages)))) => {
                assert!(pages.iter().all(|p| p.iter().all(|&x| x == 0)));
                pages.len()
            }
            other => panic!("sent {other:?}"),
        }
    }

    /// Pages are faulted in only while the applier is busy, and never more
    /// than the piece's bytes need (give or take one try's worth).
    #[test]
    fn pages_go_with_a_piece_only_while_the_applier_is_busy() {
        let mb = 1 << 20;
        // Room at once: the piece goes without pages.
        assert_eq!(pages_sent(0, mb), 0);
        // Busy for three tries: three tries' pages.
        assert_eq!(pages_sent(3, mb), 3 * PAGES_PER_TRY);
        // Busy for ever: pages for the piece's bytes, then it waits.
        let need = mb.div_ceil(PAGE_BYTES);
        let got = pages_sent(u32::MAX, mb);
        assert!((need..need + PAGES_PER_TRY).contains(&got), "{got}");
    }

    #[test]
    fn a_damaged_or_partial_file_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bytes = lcp_file(9, 7000, 3000, 97);
        let path = dir.path().join("lcp.ckpt");
        // A byte flipped past the first piece.
        let mut bad = bytes.clone();
        bad[PIECE_BYTES + 5000] ^= 0x40;
        std::fs::write(&path, &bad).expect("write");
        let err = read_all_pieces(&path, 9).expect_err("damaged");
        assert!(err.contains("damaged at byte"), "{err}");
        // Cut short: no end record.
        std::fs::write(&path, &bytes[..bytes.len() / 2 / 4096 * 4096]).expect("write");
        let err = read_all_pieces(&path, 9).expect_err("partial");
        assert!(err.contains("written only in part"), "{err}");
        // Another checkpoint's file.
        std::fs::write(&path, &bytes).expect("write");
        let err = read_all_pieces(&path, 8).expect_err("other id");
        assert!(err.contains("begin record"), "{err}");
        // Missing.
        let err = read_all_pieces(&dir.path().join("nope"), 9).expect_err("missing");
        assert!(err.contains("cannot open"), "{err}");
    }
}
