//! Warming: looks up the rows of the key operations queued next before any
//! of them runs, so that their cache misses (the hash index's slot, then
//! the row) overlap instead of being paid one after another.
//!
//! A lookup of a key in a fragment of a million rows misses the cache two
//! or three times; one operation waits for each miss in turn, but the
//! lookups of several queued operations are independent, so the processor
//! runs them side by side. What a warm lookup finds is dropped: the
//! operation looks its row up again when it runs (now from the cache), so
//! warming changes no result, only when memory is read.

use super::Lqh;
use crate::signal::BlockSignal;
use shoal_types::hash_key;

/// Key operations warmed together at most: enough cache misses in flight
/// to fill the processor's window (8 measured 25 % slower per lookup than
/// 16 in a fragment of a million rows; 32 and 64 no faster), few enough
/// that the rows are still cached when their operations run.
pub(crate) const WARM_MAX: usize = 16;

impl Lqh {
    /// Brings into the cache the index slots and rows of the key operations
    /// among `signals` (all bound for this block; the first `WARM_MAX`
    /// count): every slot first, then every row found there, so the misses
    /// of all of them are in flight together. Returns how many it warmed.
    pub fn warm<'a>(&self, signals: impl Iterator<Item = &'a BlockSignal>) -> usize {
        let mut frags = [None; WARM_MAX];
        let mut hashes = [0u64; WARM_MAX];
        let mut n = 0;
        for sig in signals.take(WARM_MAX) {
            if let BlockSignal::LqhKeyReq { op, frag, .. } = sig {
                if let Some(entry) = self.frags.get(&(op.table, *frag)) {
                    frags[n] = Some(&entry.frag);
                    hashes[n] = hash_key(op.key());
                    n += 1;
                }
            }
        }
        let mut rows = [None; WARM_MAX];
        for i in 0..n {
            rows[i] = frags[i].and_then(|f| f.guess(hashes[i]));
        }
        let mut seen = 0u8;
        for i in 0..n {
            if let (Some(f), Some(row)) = (frags[i], rows[i]) {
                seen ^= f.touch(row);
            }
        }
        std::hint::black_box(seen);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KernelConfig;
    use crate::signal::Chain;
    use shoal_types::{ColumnDef, ColumnType, TableDef, TableId, TransId};
    use shoal_wire::{KeyOp, LockMode, OpType};

    fn key_req(table: TableId, frag: u32, key: u32) -> BlockSignal {
        BlockSignal::LqhKeyReq {
            txn: 1,
            op_no: 0,
            low_water: 0,
            frag,
            frag_version: 0,
            row: 0,
            row_new: false,
            copied: false,
            api_node: 1,
            trans: TransId(1),
            op: KeyOp::new(
                OpType::Read,
                LockMode::CommittedRead,
                0,
                table,
                shoal_types::SchemaVersion(1),
                key.to_le_bytes().as_ref(),
                &[],
            ),
            chain: Chain::new(&[1]),
            hop: 0,
            commit_at_last: false,
            fired: Box::default(),
        }
    }

    /// Warming counts the key operations of fragments held here, touches
    /// only what it finds, and changes nothing: the rows and the
    /// transaction records are as before.
    #[test]
    fn warming_counts_local_key_operations_and_changes_nothing() {
        let mut def = TableDef::new(
            "t",
            vec![
                ColumnDef::new("k", ColumnType::Int { unsigned: true }),
                ColumnDef::new("v", ColumnType::Int { unsigned: true }),
            ],
            &["k"],
        )
        .unwrap();
        def.id = TableId(3);
        def.version = shoal_types::SchemaVersion(1);
        let mut lqh = Lqh::new(KernelConfig::default());
        lqh.create_table(&def, vec![0]);
        let entry = lqh.frags.get_mut(&(def.id, 0)).unwrap();
        for k in 0..100u32 {
            let mut fixed = vec![0u8; entry.layout.fixed_size];
            fixed[..4].copy_from_slice(&k.to_le_bytes());
            let id = entry
                .frag
                .insert_tentative(&mut lqh.mem, hash_key(&k.to_le_bytes()), &fixed, &[])
                .unwrap();
            entry.frag.commit_insert(&mut lqh.mem, id);
        }
        let signals = [
            key_req(def.id, 0, 5),     // a row
            key_req(def.id, 0, 1_000), // no such row
            key_req(def.id, 1, 5),     // a fragment not here
            key_req(TableId(9), 0, 5), // a table not here
            BlockSignal::AbortReq { txn: 1, node: 1 },
            key_req(def.id, 0, 99), // a row
        ];
        let used = lqh.mem.used_bytes();
        assert_eq!(lqh.warm(signals.iter()), 3);
        assert_eq!(lqh.warm(signals.iter().take(1)), 1);
        assert_eq!(lqh.warm([].iter()), 0);
        // Only the first WARM_MAX key operations count.
        let many: Vec<_> = (0..40).map(|k| key_req(def.id, 0, k)).collect();
        assert_eq!(lqh.warm(many.iter()), WARM_MAX);
        assert_eq!(lqh.mem.used_bytes(), used);
        assert_eq!(lqh.frags[&(def.id, 0)].frag.row_count(), 100);
        assert!(lqh.txns.is_empty());
    }
}
