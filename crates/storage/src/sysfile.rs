//! The node's record of what is durable (NDB's sysfile): the latest
//! durable epoch, the local checkpoints a restart starts from, and where
//! it reads the redo log from after them. Small, and rewritten often, so
//! it must survive a crash in the middle of its own write: it has two
//! slots in separate blocks, written alternately, each with a sequence
//! number and a CRC-32C. A torn write spoils at most the slot being
//! written; the reader takes the valid slot with the higher sequence
//! number. A new data dir gets record 0, synced, before anything else, so
//! that even a torn first update leaves a valid slot: both slots spoiled
//! is always damage, never a crash. Byte by byte in docs/FILES.md.

use crate::crc32c::crc32c;
use crate::redo::Lsn;

/// Where the two slots start: one block apart, so a torn write of one
/// never touches the other.
pub const SYSFILE_SLOT_STRIDE: usize = 4096;
/// Bytes of one slot (formats 2 and 3; format 1 had 48 and no
/// checkpoints).
pub const SYSFILE_SLOT_BYTES: usize = 72;
const V1_SLOT_BYTES: usize = 48;
const MAGIC: &[u8; 4] = b"SHSF";
/// Format 3 is format 2 with the cluster's history in its reserved field.
const FORMAT_VERSION: u16 = 3;

/// The local checkpoints a restart reads, oldest first: a full one
/// (`first`) and the partial ones after it, up to `last`. Checkpoint ids
/// start at 1; `first == 0` means none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LcpChain {
    pub first: u64,
    pub last: u64,
    /// No row in them is of a later epoch: they restore this epoch and
    /// later ones (with the redo log from `Sysfile::redo_start`).
    pub max_epoch: u64,
}

impl LcpChain {
    pub fn is_empty(&self) -> bool {
        self.first == 0
    }

    /// The checkpoint ids to read, in order.
    pub fn ids(&self) -> std::ops::RangeInclusive<u64> {
        if self.is_empty() {
            #[allow(clippy::reversed_empty_ranges)]
            return 1..=0;
        }
        self.first..=self.last
    }
}

/// What the node knows to be durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sysfile {
    /// Grows by one per write; picks the newer slot.
    pub seq: u64,
    /// Every transaction of this epoch and before is durable on every
    /// live node.
    pub durable_epoch: u64,
    /// A restart reads the redo log from here (older records are in the
    /// local checkpoints); a block boundary.
    pub redo_start: Lsn,
    /// The redo log is synced up to here (damage found below it is damage
    /// to durable data).
    pub redo_synced: Lsn,
    /// The checkpoints the rows before `redo_start` are in.
    pub lcp: LcpChain,
    /// The history of the cluster these files belong to (drawn when a
    /// cluster starts with no rows; 0: not known, files of format 2 or
    /// older). Rows of another history are not the cluster's.
    pub history: u32,
}

/// Why no record could be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SysfileError {
    /// Both slots hold bytes and neither is valid.
    Corrupt(String),
}

impl Sysfile {
    /// The record a new data dir starts with: nothing durable, no
    /// checkpoint, the log from its start.
    pub fn empty() -> Sysfile {
        Sysfile {
            seq: 0,
            durable_epoch: 0,
            redo_start: 0,
            redo_synced: 0,
            lcp: LcpChain::default(),
            history: 0,
        }
    }

    /// The offset in the file of the slot this record goes to.
    pub fn offset(&self) -> usize {
        (self.seq % 2) as usize * SYSFILE_SLOT_STRIDE
    }

    /// The slot's bytes.
    pub fn encode(&self) -> [u8; SYSFILE_SLOT_BYTES] {
        let mut b = [0u8; SYSFILE_SLOT_BYTES];
        b[0..4].copy_from_slice(MAGIC);
        b[4..6].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..24].copy_from_slice(&self.durable_epoch.to_le_bytes());
        b[24..32].copy_from_slice(&self.redo_start.to_le_bytes());
        b[32..40].copy_from_slice(&self.redo_synced.to_le_bytes());
        b[40..48].copy_from_slice(&self.lcp.first.to_le_bytes());
        b[48..56].copy_from_slice(&self.lcp.last.to_le_bytes());
        b[56..64].copy_from_slice(&self.lcp.max_epoch.to_le_bytes());
        b[64..68].copy_from_slice(&self.history.to_le_bytes());
        let crc = crc32c(&b[..68]);
        b[68..72].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// The next record: `durable_epoch` durable in the cluster of
    /// `history` (0: as before), the log synced through `redo_synced`; the
    /// checkpoints as they were.
    pub fn with_durable(&self, durable_epoch: u64, redo_synced: Lsn, history: u32) -> Sysfile {
        let history = if history == 0 { self.history } else { history };
        Sysfile {
            seq: self.seq + 1,
            // Epochs of another history are not comparable.
            durable_epoch: if history == self.history {
                durable_epoch.max(self.durable_epoch)
            } else {
                durable_epoch
            },
            redo_synced,
            history,
            ..*self
        }
    }

    /// The next record: a restart reads checkpoints `lcp` and the log from
    /// `redo_start`.
    pub fn with_lcp(&self, lcp: LcpChain, redo_start: Lsn) -> Sysfile {
        Sysfile {
            seq: self.seq + 1,
            lcp,
            redo_start,
            ..*self
        }
    }

    fn decode(b: &[u8]) -> Option<Sysfile> {
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        if b.len() < V1_SLOT_BYTES || &b[0..4] != MAGIC || b[6..8] != [0, 0] {
            return None;
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        let (crc_at, lcp) = match version {
            // Written before checkpoints existed: the log from its start.
            1 => (44, LcpChain::default()),
            2 | FORMAT_VERSION if b.len() >= SYSFILE_SLOT_BYTES => (
                68,
                LcpChain {
                    first: u64_at(40),
                    last: u64_at(48),
                    max_epoch: u64_at(56),
                },
            ),
            _ => return None,
        };
        let crc = u32::from_le_bytes(b[crc_at..crc_at + 4].try_into().expect("4 bytes"));
        // Formats 1 and 2 keep the 4 bytes before the checksum clear;
        // format 3 holds the history there.
        let last4 = u32::from_le_bytes(b[crc_at - 4..crc_at].try_into().expect("4 bytes"));
        let (reserved_clear, history) = match version {
            FORMAT_VERSION => (true, last4),
            _ => (last4 == 0, 0),
        };
        let s = Sysfile {
            seq: u64_at(8),
            durable_epoch: u64_at(16),
            redo_start: u64_at(24),
            redo_synced: u64_at(32),
            lcp,
            history,
        };
        let chain_sane = lcp.is_empty() || lcp.first <= lcp.last;
        // Positions a log is read from are block boundaries.
        let aligned = s
            .redo_start
            .is_multiple_of(crate::redo::REDO_BLOCK_BYTES as u64);
        (reserved_clear && chain_sane && aligned && crc32c(&b[..crc_at]) == crc).then_some(s)
    }

    /// The newest valid record of a sysfile's bytes; `Ok(None)` if it was
    /// never written (both slots zeros or missing).
    pub fn read(file: &[u8]) -> Result<Option<Sysfile>, SysfileError> {
        let slot = |at: usize| file.get(at..(at + SYSFILE_SLOT_BYTES).min(file.len()));
        let (a, b) = (slot(0), slot(SYSFILE_SLOT_STRIDE));
        // A slot holds only its own sequence numbers (odd or even).
        let from = |bytes: Option<&[u8]>, want_offset: usize| {
            bytes
                .and_then(Sysfile::decode)
                .filter(|s| s.offset() == want_offset)
        };
        let (ra, rb) = (from(a, 0), from(b, SYSFILE_SLOT_STRIDE));
        match (ra, rb) {
            (Some(x), Some(y)) => Ok(Some(if x.seq > y.seq { x } else { y })),
            (Some(x), None) | (None, Some(x)) => Ok(Some(x)),
            (None, None) => {
                let blank = |s: Option<&[u8]>| s.is_none_or(|s| s.iter().all(|&x| x == 0));
                if blank(a) && blank(b) {
                    Ok(None)
                } else {
                    Err(SysfileError::Corrupt(
                        "neither sysfile slot holds a valid record".into(),
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(records: &[Sysfile]) -> Vec<u8> {
        let mut f = vec![0u8; SYSFILE_SLOT_STRIDE + SYSFILE_SLOT_BYTES];
        for r in records {
            let at = r.offset();
            f[at..at + SYSFILE_SLOT_BYTES].copy_from_slice(&r.encode());
        }
        f
    }

    #[test]
    fn the_newer_valid_slot_wins_and_a_torn_one_is_skipped() {
        let first = Sysfile::empty().with_durable(10, 4096, 0xabcd);
        let second = first.with_lcp(
            LcpChain {
                first: 1,
                last: 2,
                max_epoch: 9,
            },
            4096,
        );
        assert_ne!(first.offset(), second.offset());
        let f = file_with(&[first, second]);
        assert_eq!(Sysfile::read(&f), Ok(Some(second)));
        // The second write torn: the first stays.
        let mut torn = f.clone();
        torn[second.offset() + 20] ^= 1;
        assert_eq!(Sysfile::read(&torn), Ok(Some(first)));
        // Never written.
        assert_eq!(Sysfile::read(&[]), Ok(None));
        assert_eq!(Sysfile::read(&vec![0; 5000]), Ok(None));
        // Both spoiled.
        let mut bad = f;
        bad[3] ^= 1;
        bad[SYSFILE_SLOT_STRIDE + 3] ^= 1;
        assert!(matches!(Sysfile::read(&bad), Err(SysfileError::Corrupt(_))));
    }

    #[test]
    fn a_record_in_the_other_slot_is_not_taken() {
        let r = Sysfile::empty().with_durable(1, 0, 5).with_durable(1, 0, 0);
        let mut f = vec![0u8; SYSFILE_SLOT_STRIDE + SYSFILE_SLOT_BYTES];
        // Copied to the wrong slot (a misdirected write).
        f[SYSFILE_SLOT_STRIDE..].copy_from_slice(&r.encode());
        assert!(matches!(Sysfile::read(&f), Err(SysfileError::Corrupt(_))));
    }

    #[test]
    fn a_format_1_record_reads_as_one_without_checkpoints() {
        let mut slot = [0u8; 48];
        slot[0..4].copy_from_slice(MAGIC);
        slot[4..6].copy_from_slice(&1u16.to_le_bytes());
        slot[8..16].copy_from_slice(&3u64.to_le_bytes()); // seq 3: slot 1
        slot[16..24].copy_from_slice(&7u64.to_le_bytes());
        slot[32..40].copy_from_slice(&8192u64.to_le_bytes());
        let crc = crc32c(&slot[..44]);
        slot[44..48].copy_from_slice(&crc.to_le_bytes());
        let mut f = vec![0u8; SYSFILE_SLOT_STRIDE + 48];
        f[SYSFILE_SLOT_STRIDE..].copy_from_slice(&slot);
        let r = Sysfile::read(&f).unwrap().unwrap();
        assert_eq!((r.seq, r.durable_epoch, r.redo_synced), (3, 7, 8192));
        assert!(r.lcp.is_empty());
    }

    #[test]
    fn the_history_is_kept_and_a_new_one_replaces_the_durable_epoch() {
        let a = Sysfile::empty().with_durable(1000, 0, 7);
        let b = a.with_durable(900, 0, 0);
        assert_eq!((b.history, b.durable_epoch), (7, 1000));
        // Another cluster's history: its epochs start again.
        let c = b.with_durable(40, 0, 9);
        assert_eq!((c.history, c.durable_epoch), (9, 40));
        let f = file_with(&[b, c]);
        assert_eq!(Sysfile::read(&f), Ok(Some(c)));
        // A format 2 record reads with history 0 (its reserved field 0).
        let mut v2 = c.encode();
        v2[4..6].copy_from_slice(&2u16.to_le_bytes());
        v2[64..68].copy_from_slice(&[0; 4]);
        let crc = crc32c(&v2[..68]);
        v2[68..72].copy_from_slice(&crc.to_le_bytes());
        let mut f = vec![0u8; SYSFILE_SLOT_STRIDE + SYSFILE_SLOT_BYTES];
        f[c.offset()..c.offset() + SYSFILE_SLOT_BYTES].copy_from_slice(&v2);
        let r = Sysfile::read(&f).unwrap().unwrap();
        assert_eq!((r.history, r.durable_epoch), (0, 40));
    }
}
