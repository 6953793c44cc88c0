//! A unique hash index in the simulation (`--unique`): index `by_s` on the
//! nullable string column, its hidden table on every node, values drawn
//! from a small set so that writes clash. Checked three ways: a refusal
//! for a duplicate must name a value another row held while the request
//! ran; no commit may leave two rows with one value (checked against the
//! model at every commit); and after quiescence the index's table holds
//! exactly one entry per row with a value, naming that row, on every
//! replica.

use super::*;
use crate::txn::S_COL;
use shoal_types::schema::UniqueIndexDef;
use shoal_types::AttrSlice;

/// The hidden table of index `by_s`.
pub(super) const UNIQUE_TABLE: TableId = TableId(2);

/// Adds index `by_s` to the simulated table; returns its hidden table.
/// `building`: the index stays listed as being built for the whole run
/// (as an index added to a table with rows is until its build is done):
/// reads through it are refused, and a write deletes an old entry only
/// after reading that it names its row.
pub(super) fn add_unique_index(def: &mut TableDef, building: bool) -> TableDef {
    let index = UniqueIndexDef {
        name: "by_s".into(),
        columns: vec![S_COL],
        table: UNIQUE_TABLE,
        building,
    };
    let mut hidden = index.table_def(def).expect("a valid unique index");
    hidden.id = UNIQUE_TABLE;
    hidden.version = VERSION;
    hidden.distribution = def.distribution.clone();
    def.unique_indexes.push(index);
    def.validate().expect("a valid table");
    hidden
}

impl World {
    /// After a commit that wrote `writes`: no two rows hold one value.
    pub(super) fn check_unique_after_commit(&self, writes: &[(u32, Image)]) -> Result<(), String> {
        if self.unique_def.is_none() {
            return Ok(());
        }
        for (key, image) in writes {
            let Some(s) = image.as_ref().and_then(|r| r.s.as_ref()) else {
                continue;
            };
            let other = (0..self.load.keys).find(|&k| {
                k != *key
                    && self
                        .model
                        .current(k)
                        .as_ref()
                        .is_some_and(|r| r.s.as_ref() == Some(s))
            });
            if let Some(other) = other {
                return Err(format!(
                    "unique index by_s broken: commit #{} gave key {key} s={s:?}, which key {other} holds",
                    self.model.seq()
                ));
            }
        }
        Ok(())
    }

    /// After quiescence: every replica of every fragment of the index's
    /// table holds the same entries, and together they are exactly one
    /// per row with a value, naming that row.
    pub(super) fn check_unique_entries(&self) -> Result<(), String> {
        let Some(hidden) = &self.unique_def else {
            return Ok(());
        };
        let map = hidden
            .distribution
            .as_ref()
            .expect("set")
            .map()
            .expect("valid");
        let mut found: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
        for frag in 0..map.fragments.len() as u32 {
            let replicas = map.replicas(frag).to_vec();
            let image = |n: u16| {
                self.node_ref(n)
                    .and_then(|d| d.fragment_image(UNIQUE_TABLE, frag))
                    .ok_or_else(|| format!("unique index fragment {frag} missing on node {n}"))
            };
            let first = image(replicas[0])?;
            for &r in &replicas[1..] {
                if image(r)? != first {
                    return Err(format!(
                        "replicas of unique index fragment {frag} differ (nodes {} and {r})",
                        replicas[0]
                    ));
                }
            }
            for (_, row) in first {
                let (attrs, _) = AttrSlice::parse(&row).map_err(|e| format!("entry: {e}"))?;
                let mut cols = attrs.iter();
                let (Some((0, Some(s))), Some((1, Some(pk)))) = (cols.next(), cols.next()) else {
                    return Err(format!("a malformed unique index entry {row:?}"));
                };
                let pk: [u8; 4] = pk
                    .try_into()
                    .map_err(|_| format!("an entry names a key of {} bytes", pk.len()))?;
                if found.insert(s.to_vec(), u32::from_le_bytes(pk)).is_some() {
                    return Err(format!("unique index value {s:?} is in two fragments"));
                }
            }
        }
        let mut expected: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
        for key in 0..self.load.keys {
            if let Some(s) = self.model.current(key).as_ref().and_then(|r| r.s.clone()) {
                expected.insert(s.into_bytes(), key);
            }
        }
        if found != expected {
            let extra: Vec<_> = found
                .iter()
                .filter(|(s, k)| expected.get(*s) != Some(k))
                .collect();
            let missing: Vec<_> = expected
                .iter()
                .filter(|(s, k)| found.get(*s) != Some(k))
                .collect();
            return Err(format!(
                "unique index by_s does not match its rows: entries without their row {extra:?}, rows without their entry {missing:?}"
            ));
        }
        Ok(())
    }
}
