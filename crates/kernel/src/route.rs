//! Where an operation goes: a table's distribution map and distribution
//! key, as TC uses them to pick the fragment (and, with many nodes, the
//! node) of each operation.

use crate::signal::Chain;
use shoal_types::distribution::{distribution_key, DistributionMap, DistributionSpec, FragmentId};
use shoal_types::{hash_key, RowLayout, TableDef};
use std::sync::Arc;

pub struct TableRoute {
    layout: Arc<RowLayout>,
    key_columns: Option<u16>,
    map: DistributionMap,
    /// Per fragment: every replica, primary first (where writes go).
    write_chains: Vec<Chain>,
    /// Per fragment: the primary alone (where reads go).
    read_chains: Vec<Chain>,
    /// Read from backup (NDB's READ_BACKUP): committed reads go to the
    /// replica on the coordinator's own node when it has one.
    read_backup: bool,
}

impl TableRoute {
    /// The table's route. A table without a distribution (built by hand,
    /// not by mgmd) has one fragment on `own_node`.
    pub fn new(def: &TableDef, own_node: u16) -> TableRoute {
        let spec = def
            .distribution
            .clone()
            .unwrap_or_else(|| DistributionSpec::single_node(own_node, 1));
        // mgmd validated the spec when it created the table.
        let map = spec.map().expect("a validated distribution");
        let write_chains = map
            .fragments
            .iter()
            .map(|f| Chain::new(&f.replicas))
            .collect();
        let read_chains = map
            .fragments
            .iter()
            .map(|f| Chain::new(&f.replicas[..1]))
            .collect();
        TableRoute {
            layout: Arc::new(RowLayout::new(def)),
            key_columns: def.options.distribution_key_columns,
            map,
            write_chains,
            read_chains,
            read_backup: def.options.read_backup,
        }
    }

    /// Whether the table serves committed reads from any replica.
    pub fn read_backup(&self) -> bool {
        self.read_backup
    }

    /// Where a committed read of `frag` goes when TC runs on `own_node`:
    /// the local replica if the table reads from backups and this node
    /// holds one, else the primary.
    pub fn committed_read_chain(&self, frag: FragmentId, own_node: u16) -> Chain {
        if self.read_backup && self.map.replicas(frag).contains(&own_node) {
            Chain::new(&[own_node])
        } else {
            self.read_chains[frag as usize]
        }
    }

    /// The replicas an operation on `frag` runs on: the primary alone for
    /// a read, every replica (primary first) for a write.
    pub fn chain(&self, frag: FragmentId, read: bool) -> Chain {
        let chains = if read {
            &self.read_chains
        } else {
            &self.write_chains
        };
        chains[frag as usize]
    }

    /// The fragment of an encoded primary key. A malformed key maps to
    /// fragment 0, whose LQH then reports what is wrong with it.
    pub fn fragment_of(&self, key: &[u8]) -> FragmentId {
        match distribution_key(&self.layout, key, self.key_columns) {
            Ok(k) => self.map.fragment_of(hash_key(k)),
            Err(_) => 0,
        }
    }

    /// The fragments with a replica on `node`.
    pub fn fragments_on(&self, node: u16) -> Vec<FragmentId> {
        (0..self.map.fragments.len() as FragmentId)
            .filter(|&f| self.map.replicas(f).contains(&node))
            .collect()
    }
}
