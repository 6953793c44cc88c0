//! A simulated disk for one data node: files of bytes whose writes are
//! durable only once synced. A crash keeps every synced byte and, of the
//! writes since the last sync, some or none, whole or torn at a sector
//! boundary, in any order (disks reorder writes); a chosen sector can be
//! corrupted. The seeded RNG decides, so a run replays exactly.
//!
//! This is the disk the durability protocols (redo, checkpoints, the
//! durable epoch) will be checked against; its own test drives the redo
//! log's writer and reader (`shoal_storage::redo`) through crashes.

use rand::rngs::SmallRng;
use rand::Rng;
use std::collections::BTreeMap;

/// The unit a write tears at.
pub const SECTOR_BYTES: usize = 512;

/// A write since the file's last sync.
#[derive(Clone, Debug)]
struct Unsynced {
    offset: usize,
    bytes: Vec<u8>,
}

#[derive(Clone, Debug, Default)]
struct SimFile {
    /// What survives a crash.
    durable: Vec<u8>,
    /// What a read sees now: durable plus the unsynced writes.
    current: Vec<u8>,
    unsynced: Vec<Unsynced>,
}

/// One node's disk, files by name.
#[derive(Clone, Debug, Default)]
pub struct SimDisk {
    files: BTreeMap<String, SimFile>,
}

fn write_at(buf: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
    if buf.len() < offset + bytes.len() {
        buf.resize(offset + bytes.len(), 0);
    }
    buf[offset..offset + bytes.len()].copy_from_slice(bytes);
}

impl SimDisk {
    /// Writes `bytes` at `offset` of `file` (created if missing); reads
    /// see it at once, a crash may lose it until [`SimDisk::sync`].
    pub fn write(&mut self, file: &str, offset: usize, bytes: &[u8]) {
        let f = self.files.entry(file.to_string()).or_default();
        write_at(&mut f.current, offset, bytes);
        f.unsynced.push(Unsynced {
            offset,
            bytes: bytes.to_vec(),
        });
    }

    /// Makes every write to `file` so far durable.
    pub fn sync(&mut self, file: &str) {
        if let Some(f) = self.files.get_mut(file) {
            f.durable = f.current.clone();
            f.unsynced.clear();
        }
    }

    /// Makes `file` `len` bytes long, cut or extended with zeros, durably
    /// (`set_len`, then a sync).
    pub fn set_len(&mut self, file: &str, len: usize) {
        if let Some(f) = self.files.get_mut(file) {
            f.current.resize(len, 0);
            f.durable = f.current.clone();
            f.unsynced.clear();
        }
    }

    /// The disk as a crash now would leave it if no unsynced write
    /// survived.
    pub fn synced_view(&self) -> SimDisk {
        let mut d = self.clone();
        for f in d.files.values_mut() {
            f.current = f.durable.clone();
            f.unsynced.clear();
        }
        d
    }

    /// Deletes `file`, durably (an unlink and a sync of the directory).
    pub fn delete(&mut self, file: &str) {
        self.files.remove(file);
    }

    pub fn exists(&self, file: &str) -> bool {
        self.files.contains_key(file)
    }

    /// The files' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// The bytes of `file` as a read sees them (empty if it does not exist).
    pub fn read(&self, file: &str) -> &[u8] {
        self.files.get(file).map_or(&[], |f| &f.current)
    }

    /// The node crashed: each unsynced write survives whole, torn (some of
    /// its sectors, in any order) or not at all; then only durable bytes
    /// remain.
    pub fn crash(&mut self, rng: &mut SmallRng) {
        for f in self.files.values_mut() {
            let mut after = f.durable.clone();
            for w in std::mem::take(&mut f.unsynced) {
                match rng.random_range(0..3) {
                    0 => {} // lost
                    1 => write_at(&mut after, w.offset, &w.bytes),
                    _ => {
                        // Torn: some sectors of it made it.
                        for (i, sector) in w.bytes.chunks(SECTOR_BYTES).enumerate() {
                            if rng.random_bool(0.5) {
                                write_at(&mut after, w.offset + i * SECTOR_BYTES, sector);
                            }
                        }
                    }
                }
            }
            f.durable = after.clone();
            f.current = after;
        }
    }

    /// Flips a byte of the sector at `offset` of `file`, durably (a bad
    /// sector). Does nothing past the file's end.
    pub fn corrupt(&mut self, file: &str, offset: usize, rng: &mut SmallRng) {
        let Some(f) = self.files.get_mut(file) else {
            return;
        };
        let sector = offset - offset % SECTOR_BYTES;
        if sector >= f.durable.len() {
            return;
        }
        let end = (sector + SECTOR_BYTES).min(f.durable.len());
        let at = rng.random_range(sector..end);
        let flip = rng.random_range(1..=255u8);
        f.durable[at] ^= flip;
        f.current[at] ^= flip;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use shoal_storage::redo::{read_log, LogEnd, RedoKind, RedoRecord, RedoWriter};

    #[test]
    fn synced_bytes_survive_a_crash_and_unsynced_ones_may_not() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut disk = SimDisk::default();
        disk.write("f", 0, &[1; 1000]);
        disk.sync("f");
        disk.write("f", 1000, &[2; 4000]);
        assert_eq!(disk.read("f").len(), 5000);
        disk.crash(&mut rng);
        let after = disk.read("f");
        assert_eq!(&after[..1000], &[1; 1000][..]);
        assert!(after[1000..].iter().all(|&b| b == 2 || b == 0));
    }

    /// The redo log through crashes: every record whose bytes were synced
    /// is read back, in order, after any crash; records appended later may
    /// or may not be; nothing else ever is.
    #[test]
    fn the_redo_log_keeps_every_synced_record_through_crashes() {
        for seed in 0..200u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut disk = SimDisk::default();
            let mut writer = RedoWriter::new(0);
            // Every record appended so far, and how many are durable.
            let mut written: Vec<(u32, Vec<u8>)> = Vec::new();
            let mut durable = 0usize;
            // The log position synced up to.
            let mut durable_lsn = 0u64;
            for step in 0..rng.random_range(5..60) {
                let n = written.len() as u32;
                let size = rng.random_range(0..6_000);
                let attrs: Vec<u8> = (0..size).map(|i| (i as u32 ^ n) as u8).collect();
                writer.append(&RedoRecord {
                    kind: RedoKind::Write,
                    epoch: u64::from(n),
                    table: 1,
                    frag: 0,
                    row: n,
                    key: &n.to_le_bytes(),
                    attrs: &attrs,
                });
                written.push((n, attrs));
                if rng.random_bool(0.3) || step % 7 == 6 {
                    if let Some((lsn, bytes)) = writer.take() {
                        disk.write("redo", lsn as usize, &bytes);
                        if rng.random_bool(0.8) {
                            disk.sync("redo");
                            durable = written.len();
                            durable_lsn = lsn + bytes.len() as u64;
                        }
                    }
                }
            }
            // Handed out but maybe not synced; then the crash.
            if let Some((lsn, bytes)) = writer.take() {
                disk.write("redo", lsn as usize, &bytes);
            }
            disk.crash(&mut rng);
            let log = read_log(disk.read("redo"), 0);
            // Damage is only where nothing was synced (a crash may keep a
            // later block of an unsynced write and lose an earlier one).
            assert!(
                !matches!(log.end, LogEnd::Corrupt { at, .. } if at < durable_lsn),
                "seed {seed}: {:?} below the synced position {durable_lsn}",
                log.end
            );
            assert!(
                log.entries.len() >= durable,
                "seed {seed}: {} records read, {durable} were synced",
                log.entries.len()
            );
            for (e, (n, attrs)) in log.entries.iter().zip(&written) {
                let r = e.record();
                assert_eq!((r.row, r.attrs), (*n, attrs.as_slice()), "seed {seed}");
            }
        }
    }

    /// The sysfile through crashes: what is read back is the last record
    /// synced or a newer one written after it, never an older one.
    #[test]
    fn the_sysfile_never_goes_back_past_its_last_sync() {
        use shoal_storage::sysfile::Sysfile;
        for seed in 0..300u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut disk = SimDisk::default();
            let mut current = Sysfile::empty();
            // Created with record 0, synced, before anything else: a torn
            // first write then still leaves a valid slot.
            disk.write("sysfile", current.offset(), &current.encode());
            disk.sync("sysfile");
            let mut synced = current;
            for _ in 0..rng.random_range(1..20) {
                current =
                    current.with_durable(current.durable_epoch + 1, current.redo_synced + 4096, 0);
                disk.write("sysfile", current.offset(), &current.encode());
                if rng.random_bool(0.7) {
                    disk.sync("sysfile");
                    synced = current;
                }
            }
            disk.crash(&mut rng);
            let read = Sysfile::read(disk.read("sysfile"))
                .unwrap_or_else(|e| panic!("seed {seed}: {e:?}"));
            let Some(r) = read else {
                panic!("seed {seed}: {synced:?} was synced, nothing read");
            };
            assert!(
                r.seq >= synced.seq && r.seq <= current.seq,
                "seed {seed}: {r:?} after {synced:?}"
            );
            assert_eq!(r.durable_epoch, r.seq, "seed {seed}: a record as written");
        }
    }

    #[test]
    fn a_corrupted_sector_is_detected_never_read_as_data() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut disk = SimDisk::default();
        let mut writer = RedoWriter::new(0);
        // Records longer than a sector: the one corrupted holds data
        // only (no padding a flip could land in harmlessly).
        let attrs = [9u8; 600];
        for n in 0..20u32 {
            writer.append(&RedoRecord {
                kind: RedoKind::Write,
                epoch: 1,
                table: 1,
                frag: 0,
                row: n,
                key: &n.to_le_bytes(),
                attrs: &attrs,
            });
            let (lsn, bytes) = writer.take().unwrap();
            disk.write("redo", lsn as usize, &bytes);
        }
        disk.sync("redo");
        disk.corrupt("redo", 5 * 4096, &mut rng);
        let log = read_log(disk.read("redo"), 0);
        assert_eq!(log.entries.len(), 5);
        assert!(matches!(log.end, LogEnd::Corrupt { .. }), "{:?}", log.end);
    }
}
