//! Where a row lives: distribution key → hash → bucket → fragment → the
//! nodes of one node group, one of them the primary (NDB's hashmap
//! partitioning; see NDB-REFERENCE §2).
//!
//! - The **distribution key** is the whole primary key, or a prefix of its
//!   columns (a per-table option), so rows that share the prefix share a
//!   fragment.
//! - A fixed number of **buckets** ([`BUCKETS`]) sits between the hash and
//!   the fragments: adding fragments later moves whole buckets, never
//!   rehashes keys.
//! - A **fragment** has one replica on every node of its node group. The
//!   first replica is the primary; primaries rotate over the group's nodes,
//!   so every node holds about the same number of primaries.
//!
//! A [`DistributionMap`] is plain versioned data: mgmd builds and serves it,
//! clients use it to start a transaction on the node holding the primary of
//! its first key, and data nodes to find where each operation goes.
//!
//! Invariants: every bucket names an existing fragment; fragments get
//! buckets evenly (their counts differ by at most one); a fragment's
//! replicas are exactly the nodes of its node group, primary first.

use serde::{Deserialize, Serialize};

use crate::error::{ErrorCode, ShoalError};
use crate::layout::RowLayout;
use crate::value::encode_value;
use crate::{TableDef, Value};

/// Buckets per table (NDB's default hashmap size). A multiple of every
/// fragment count up to 16 and of many beyond, so buckets spread evenly.
pub const BUCKETS: u32 = 3840;

/// Index of a fragment within its table.
pub type FragmentId = u32;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FragmentReplicas {
    pub node_group: u16,
    /// Node ids holding a replica; `replicas[0]` is the primary.
    pub replicas: Vec<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DistributionMap {
    /// Bumped whenever fragments or buckets move (online reorganization).
    pub version: u32,
    pub fragments: Vec<FragmentReplicas>,
    /// `buckets[b]` is the fragment that owns bucket `b`.
    pub buckets: Vec<FragmentId>,
}

/// How a table is distributed, as mgmd stores it with the table: the node
/// groups and the fragment count per group (the map follows from these).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DistributionSpec {
    pub version: u32,
    pub node_groups: Vec<Vec<u16>>,
    pub fragments_per_group: u32,
}

impl DistributionSpec {
    /// Every fragment on the one node `node_id`.
    pub fn single_node(node_id: u16, fragments: u32) -> Self {
        DistributionSpec {
            version: 1,
            node_groups: vec![vec![node_id]],
            fragments_per_group: fragments,
        }
    }

    pub fn fragment_count(&self) -> u32 {
        self.node_groups.len() as u32 * self.fragments_per_group
    }

    pub fn map(&self) -> Result<DistributionMap, ShoalError> {
        let mut map = DistributionMap::new(&self.node_groups, self.fragments_per_group)?;
        map.version = self.version;
        Ok(map)
    }
}

/// Node groups as NDB forms them by default: data node ids in ascending
/// order, `replicas` nodes per group (nodes 1,2 → group 0; 3,4 → group 1).
pub fn node_groups(data_nodes: &[u16], replicas: usize) -> Result<Vec<Vec<u16>>, ShoalError> {
    if replicas == 0 || data_nodes.is_empty() || !data_nodes.len().is_multiple_of(replicas) {
        return Err(ShoalError::with_detail(
            ErrorCode::BadRequest,
            format!(
                "{} data nodes cannot form node groups of {replicas} replicas",
                data_nodes.len()
            ),
        ));
    }
    let mut ids = data_nodes.to_vec();
    ids.sort_unstable();
    Ok(ids.chunks(replicas).map(<[u16]>::to_vec).collect())
}

impl DistributionMap {
    /// `fragments_per_group` fragments in every node group, buckets dealt
    /// round-robin over all fragments.
    pub fn new(groups: &[Vec<u16>], fragments_per_group: u32) -> Result<Self, ShoalError> {
        let bad = |d: String| ShoalError::with_detail(ErrorCode::BadRequest, d);
        if groups.is_empty() || groups.iter().any(Vec::is_empty) {
            return Err(bad("every node group needs at least one node".into()));
        }
        let total = groups.len() as u64 * u64::from(fragments_per_group);
        if fragments_per_group == 0 || total > u64::from(BUCKETS) {
            return Err(bad(format!(
                "{fragments_per_group} fragments per node group × {} groups: must be 1..={BUCKETS} fragments",
                groups.len()
            )));
        }
        let mut fragments = Vec::with_capacity(total as usize);
        // Fragment f lives in group f % G, so consecutive fragments (and
        // hence consecutive buckets) alternate between node groups.
        for f in 0..total as usize {
            let g = f % groups.len();
            let nodes = &groups[g];
            let nth_in_group = f / groups.len();
            let mut replicas = nodes.clone();
            replicas.rotate_left(nth_in_group % nodes.len());
            fragments.push(FragmentReplicas {
                node_group: g as u16,
                replicas,
            });
        }
        let buckets = (0..BUCKETS).map(|b| b % total as u32).collect();
        Ok(DistributionMap {
            version: 1,
            fragments,
            buckets,
        })
    }

    /// The bucket of a distribution-key hash.
    #[inline]
    pub fn bucket_of(hash: u64) -> u32 {
        // High bits: the hash index of a fragment uses the low ones.
        ((hash >> 32) % u64::from(BUCKETS)) as u32
    }

    #[inline]
    pub fn fragment_of(&self, hash: u64) -> FragmentId {
        self.buckets[Self::bucket_of(hash) as usize]
    }

    /// The node holding the primary replica of `fragment`.
    #[inline]
    pub fn primary(&self, fragment: FragmentId) -> u16 {
        self.fragments[fragment as usize].replicas[0]
    }

    pub fn replicas(&self, fragment: FragmentId) -> &[u16] {
        &self.fragments[fragment as usize].replicas
    }

    /// How many primaries each node holds, by node id.
    pub fn primaries_per_node(&self) -> std::collections::BTreeMap<u16, usize> {
        let mut counts = std::collections::BTreeMap::new();
        for f in &self.fragments {
            for &n in &f.replicas {
                counts.entry(n).or_insert(0);
            }
            *counts.entry(f.replicas[0]).or_insert(0) += 1;
        }
        counts
    }
}

/// The bytes of an encoded primary key that form the distribution key: the
/// whole key, or its first `prefix_columns` key columns.
pub fn distribution_key<'k>(
    layout: &RowLayout,
    key: &'k [u8],
    prefix_columns: Option<u16>,
) -> Result<&'k [u8], ShoalError> {
    let Some(n) = prefix_columns else {
        return Ok(key);
    };
    let mut end = 0;
    let mut seen = 0u16;
    layout.split_key(key, |_, bytes| {
        if seen < n {
            // `bytes` borrows from `key`: its end is the prefix's end.
            end = bytes.as_ptr() as usize + bytes.len() - key.as_ptr() as usize;
        }
        seen += 1;
    })?;
    Ok(&key[..end])
}

/// How many primary-key columns form `def`'s distribution key.
pub fn distribution_key_columns(def: &TableDef) -> usize {
    usize::from(
        def.options
            .distribution_key_columns
            .unwrap_or(def.primary_key.len() as u16),
    )
}

/// The distribution key of the rows whose distribution-key columns (the
/// primary key's first [`distribution_key_columns`], in key order) hold
/// `values`: the bytes an encoded primary key starts with (each column's
/// canonical bytes, a variable-size one after its u16 length), which
/// [`distribution_key`] cuts from a whole key. Values past the
/// distribution key are ignored. `None` if there are fewer, one is NULL
/// or one does not fit its column.
pub fn distribution_key_of_values(def: &TableDef, values: &[Value]) -> Option<Vec<u8>> {
    let n = distribution_key_columns(def);
    if values.len() < n {
        return None;
    }
    let mut key = Vec::new();
    for (&c, v) in def.primary_key.get(..n)?.iter().zip(values) {
        let col = def.columns.get(usize::from(c))?;
        if v.is_null() {
            return None;
        }
        if col.ty.is_var() {
            let at = key.len();
            key.extend_from_slice(&[0, 0]);
            encode_value(col, v, &mut key).ok()?;
            let len = u16::try_from(key.len() - at - 2).ok()?;
            key[at..at + 2].copy_from_slice(&len.to_le_bytes());
        } else {
            encode_value(col, v, &mut key).ok()?;
        }
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{hash_key, ColumnDef, ColumnType, TableDef, Value};

    #[test]
    fn node_groups_follow_node_id_order() {
        assert_eq!(
            node_groups(&[4, 1, 3, 2], 2).unwrap(),
            vec![vec![1, 2], vec![3, 4]]
        );
        assert_eq!(node_groups(&[1], 1).unwrap(), vec![vec![1]]);
        assert!(node_groups(&[1, 2, 3], 2).is_err());
        assert!(node_groups(&[], 1).is_err());
    }

    #[test]
    fn primaries_spread_evenly_and_replicas_are_the_group() {
        for (nodes, r, per_group) in [
            (vec![1, 2], 2, 2),
            (vec![1, 2, 3, 4], 2, 2),
            (vec![1, 2, 3, 4], 2, 3),
            (vec![1, 2, 3], 3, 6),
            (vec![1, 2, 3, 4, 5, 6, 7, 8], 4, 8),
            (vec![1, 2, 3, 4], 1, 4),
        ] {
            let groups = node_groups(&nodes, r).unwrap();
            let map = DistributionMap::new(&groups, per_group).unwrap();
            assert_eq!(map.fragments.len(), groups.len() * per_group as usize);
            for f in &map.fragments {
                let mut got = f.replicas.clone();
                got.sort_unstable();
                assert_eq!(got, groups[f.node_group as usize]);
            }
            let counts = map.primaries_per_node();
            assert_eq!(counts.len(), nodes.len(), "{counts:?}");
            let (min, max) = (
                counts.values().min().unwrap(),
                counts.values().max().unwrap(),
            );
            assert!(max - min <= 1, "{nodes:?} r={r}: {counts:?}");
        }
    }

    #[test]
    fn buckets_spread_evenly_over_fragments() {
        let groups = node_groups(&[1, 2, 3, 4], 2).unwrap();
        let map = DistributionMap::new(&groups, 3).unwrap();
        let mut per_fragment = vec![0u32; map.fragments.len()];
        for &f in &map.buckets {
            per_fragment[f as usize] += 1;
        }
        let (min, max) = (
            per_fragment.iter().min().unwrap(),
            per_fragment.iter().max().unwrap(),
        );
        assert!(max - min <= 1, "{per_fragment:?}");
        // Keys spread too.
        let mut hits = vec![0u32; map.fragments.len()];
        for k in 0u32..60_000 {
            hits[map.fragment_of(hash_key(&k.to_le_bytes())) as usize] += 1;
        }
        for h in &hits {
            assert!((9_000..11_000).contains(h), "{hits:?}");
        }
        assert!(DistributionMap::new(&groups, 0).is_err());
        assert!(DistributionMap::new(&groups, BUCKETS).is_err());
    }

    #[test]
    fn a_key_prefix_keeps_related_rows_together() {
        let def = TableDef::new(
            "orders",
            vec![
                ColumnDef::new("customer", ColumnType::VarChar(20)),
                ColumnDef::new("order_no", ColumnType::Int { unsigned: true }),
            ],
            &["customer", "order_no"],
        )
        .unwrap();
        let layout = RowLayout::new(&def);
        let key = |c: &str, n: u64| {
            let mut out = Vec::new();
            layout
                .encode_key(&[Value::Str(c.into()), Value::UInt(n)], &mut out)
                .unwrap();
            out
        };
        let (a1, a2, b1) = (key("alice", 1), key("alice", 2), key("bob", 1));
        let prefix = |k: &[u8]| distribution_key(&layout, k, Some(1)).unwrap().to_vec();
        assert_eq!(prefix(&a1), prefix(&a2));
        assert_ne!(prefix(&a1), prefix(&b1));
        assert_eq!(distribution_key(&layout, &a1, None).unwrap(), &a1[..]);
        assert_eq!(distribution_key(&layout, &a1, Some(2)).unwrap(), &a1[..]);
        let groups = node_groups(&[1, 2, 3, 4], 2).unwrap();
        let map = DistributionMap::new(&groups, 4).unwrap();
        for n in 0..100 {
            let k = key("alice", n);
            assert_eq!(
                map.fragment_of(hash_key(prefix(&k).as_slice())),
                map.fragment_of(hash_key(prefix(&a1).as_slice()))
            );
        }
    }
}
