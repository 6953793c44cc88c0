//! TC: which fragments an index scan must ask (NDB's partition pruning).
//! When the index leads with the table's distribution key and every range
//! of the scan is an equality covering it, each range's rows live in the
//! one fragment that key hashes to: the scan asks only those.

use crate::dih::TableDist;
use shoal_types::distribution::FragmentId;
use shoal_types::index_key::decode_key;
use shoal_types::value::encode_value;
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
    let n = usize::from(
        def.options
            .distribution_key_columns
            .unwrap_or(def.primary_key.len() as u16),
    );
    let columns = &def.indexes.get(index)?.columns;
    if columns.len() < n || columns[..n] != def.primary_key[..n] {
        return None;
    }
    let mut frags = BTreeSet::new();
    let mut dist_key = Vec::new();
    for r in ranges {
        let (Some((low, true)), Some((high, true))) = (r.low, r.high) else {
            return None;
        };
        if low != high {
            return None;
        }
        let values = decode_key(def, columns, low).ok()?;
        if values.len() < n {
            return None;
        }
        // The distribution key as the primary key encodes it: each
        // column's canonical bytes, a var column after its u16 length.
        dist_key.clear();
        for (&c, v) in columns[..n].iter().zip(&values) {
            let col = &def.columns[usize::from(c)];
            if v.is_null() {
                return None;
            }
            if col.ty.is_var() {
                let at = dist_key.len();
                dist_key.extend_from_slice(&[0, 0]);
                encode_value(col, v, &mut dist_key).ok()?;
                let len = (dist_key.len() - at - 2) as u16;
                dist_key[at..at + 2].copy_from_slice(&len.to_le_bytes());
            } else {
                encode_value(col, v, &mut dist_key).ok()?;
            }
        }
        frags.insert(route.fragment_of_dist_key(hash_key(&dist_key)));
    }
    Some(frags)
}
