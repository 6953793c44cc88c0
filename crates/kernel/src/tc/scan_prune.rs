//! TC: which fragments an index scan must ask (NDB's partition pruning).
//! When the index leads with the table's distribution key and every range
//! of the scan is an equality covering it, each range's rows live in the
//! one fragment that key hashes to: the scan asks only those.

use crate::dih::TableDist;
use shoal_types::distribution::{distribution_key_columns, distribution_key_of_values, FragmentId};
use shoal_types::index_key::decode_key;
use shoal_types::{hash_key, TableDef};
use shoal_wire::scan::KeyRange;
use std::collections::BTreeSet;

/// The fragments holding every row `ranges` of index `index` can reach,
/// or `None` if the ranges do not fix the distribution key (every
/// fragment, then).
pub(super) fn fragments_of_ranges(
    route: &TableDist,
    def: &TableDef,
    index: usize,
    ranges: &[KeyRange],
) -> Option<BTreeSet<FragmentId>> {
    let n = distribution_key_columns(def);
    let columns = &def.indexes.get(index)?.columns;
    if columns.len() < n || columns[..n] != def.primary_key[..n] {
        return None;
    }
    let mut frags = BTreeSet::new();
    for r in ranges {
        let (Some((low, true)), Some((high, true))) = (r.low, r.high) else {
            return None;
        };
        if low != high {
            return None;
        }
        let values = decode_key(def, columns, low).ok()?;
        let dist_key = distribution_key_of_values(def, &values)?;
        frags.insert(route.fragment_of_dist_key(hash_key(&dist_key)));
    }
    Some(frags)
}
