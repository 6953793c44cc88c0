//! Hash maps for blocks, with a fixed hasher: the same inserts and removes
//! give the same iteration order in every process, so a block that walks
//! a map (a takeover over its transactions, the clients of a failed
//! coordinator) sends its signals in the same order on every run of a
//! simulator seed — determinism by construction, not a sort at each use.
//!
//! The default hasher of `hashbrown` seeds itself at random per map; it
//! must not be used in a block. The seed comes from the driver
//! (`KernelConfig::hash_seed`): the simulator derives it from its own
//! seed, the runtime draws it once at start, so a client that picks some
//! keys (its transaction ids) cannot aim them all at one bucket.

use foldhash::fast::FixedState;

/// A `hashbrown` map with the fixed hasher.
pub type DetHashMap<K, V> = hashbrown::HashMap<K, V, FixedState>;

/// An empty [`DetHashMap`] hashing with `seed`.
pub fn new_map<K, V>(seed: u64) -> DetHashMap<K, V> {
    DetHashMap::with_hasher(FixedState::with_seed(seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_maps_with_the_same_history_iterate_alike() {
        let fill = || {
            let mut m: DetHashMap<u64, u64> = new_map(42);
            for k in 0..10_000u64 {
                m.insert(k.wrapping_mul(0x9E37_79B9_7F4A_7C15), k);
            }
            for k in (0..10_000u64).step_by(3) {
                m.remove(&k.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            }
            m.into_iter().collect::<Vec<_>>()
        };
        assert_eq!(fill(), fill());
    }
}
