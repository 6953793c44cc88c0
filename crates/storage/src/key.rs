//! Compares a stored row's primary key with an encoded key without
//! allocating, for the hash index's equality check on the lookup path.
//!
//! `RowLayout::key_matches` rebuilds the key into a new `Vec` when a key
//! column is variable-sized; this walks the row in place instead. It relies
//! on the layout documented in `shoal_types::layout`: fixed key columns
//! first in the fixed part, in key order; every variable column, key or
//! not, in the var part in column order as `u16 length` + bytes. Debug
//! builds check every answer against `key_matches`.

use shoal_types::layout::NULL_LEN;
use shoal_types::RowLayout;

#[derive(Clone, Copy, Debug)]
enum KeyPart {
    /// A fixed key column at `offset` in the fixed part.
    Fixed { offset: usize, len: usize },
    /// A variable key column, the `index`-th value of the var part.
    Var { index: usize },
}

#[derive(Clone, Debug)]
pub(crate) struct KeyMatcher {
    /// `Some(n)`: the key is `fixed[..n]`, one compare.
    prefix_len: Option<usize>,
    /// Key columns in key order, used when some key column is variable.
    parts: Vec<KeyPart>,
}

impl KeyMatcher {
    pub(crate) fn new(layout: &RowLayout) -> Self {
        let table = &layout.table;
        let mut parts = Vec::with_capacity(table.primary_key.len());
        let mut fixed_offset = 0;
        for &k in &table.primary_key {
            let col = &table.columns[k as usize];
            match col.ty.fixed_size() {
                Some(len) => {
                    parts.push(KeyPart::Fixed {
                        offset: fixed_offset,
                        len,
                    });
                    fixed_offset += len;
                }
                None => {
                    let index = table.columns[..k as usize]
                        .iter()
                        .filter(|c| c.ty.is_var())
                        .count();
                    parts.push(KeyPart::Var { index });
                }
            }
        }
        assert_eq!(
            layout.key_prefix_len.is_some(),
            parts.iter().all(|p| matches!(p, KeyPart::Fixed { .. })),
            "key layout disagrees with RowLayout"
        );
        KeyMatcher {
            prefix_len: layout.key_prefix_len,
            parts,
        }
    }

    /// When every key column is fixed, the key's length; the var part is
    /// then never needed to compare keys.
    #[inline]
    pub(crate) fn prefix_len(&self) -> Option<usize> {
        self.prefix_len
    }

    /// Whether the stored row `(fixed, var)` has the encoded key `key`.
    #[inline]
    pub(crate) fn matches(&self, fixed: &[u8], var: &[u8], key: &[u8]) -> bool {
        match self.prefix_len {
            Some(n) => key.len() == n && fixed[..n] == *key,
            None => self.matches_parts(fixed, var, key),
        }
    }

    fn matches_parts(&self, fixed: &[u8], var: &[u8], key: &[u8]) -> bool {
        let mut rest = key;
        for part in &self.parts {
            let (stored, len) = match *part {
                KeyPart::Fixed { offset, len } => (&fixed[offset..offset + len], len),
                KeyPart::Var { index } => {
                    let Some(stored) = var_value(var, index) else {
                        return false;
                    };
                    let Some(len) = rest.get(..2) else {
                        return false;
                    };
                    rest = &rest[2..];
                    (stored, u16::from_le_bytes([len[0], len[1]]) as usize)
                }
            };
            if stored.len() != len || rest.get(..len) != Some(stored) {
                return false;
            }
            rest = &rest[len..];
        }
        rest.is_empty()
    }
}

/// The `index`-th value of a var part; `None` if NULL or malformed (a key
/// column is never NULL, so neither matches any key).
fn var_value(var: &[u8], index: usize) -> Option<&[u8]> {
    let mut rest = var;
    let mut i = 0;
    loop {
        let len = u16::from_le_bytes(rest.get(..2)?.try_into().ok()?);
        rest = &rest[2..];
        let len = if len == NULL_LEN {
            None
        } else {
            Some(len as usize)
        };
        if i == index {
            return rest.get(..len?);
        }
        rest = rest.get(len.unwrap_or(0)..)?;
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use shoal_types::{AttrSlice, ColumnDef, ColumnType, TableDef, Value};

    fn check(table: TableDef, mut key_values: impl FnMut(&mut SmallRng) -> Vec<Value>) {
        let layout = RowLayout::new(&table);
        let m = KeyMatcher::new(&layout);
        let mut rng = SmallRng::seed_from_u64(7);
        let none = [0u8, 0];
        let (empty, _) = AttrSlice::parse(&none).unwrap();
        let mut rows = Vec::new();
        for _ in 0..50 {
            let mut key = Vec::new();
            layout.encode_key(&key_values(&mut rng), &mut key).unwrap();
            let (fixed, var) = layout.build_row(&key, empty).unwrap();
            rows.push((key, fixed, var));
        }
        for (_, fixed, var) in &rows {
            for (key, _, _) in &rows {
                let want = layout.key_matches(fixed, var, key);
                assert_eq!(m.matches(fixed, var, key), want);
            }
            // Truncated and extended keys never match.
            let (key, _, _) = &rows[0];
            assert!(!m.matches(fixed, var, &key[..key.len() - 1]));
            let mut longer = key.clone();
            longer.push(0);
            assert!(!m.matches(fixed, var, &longer));
        }
    }

    fn bytes(rng: &mut SmallRng, max: usize) -> Value {
        let n = rng.random_range(0..=max);
        Value::Bytes((0..n).map(|_| rng.random_range(0..3u8)).collect())
    }

    #[test]
    fn var_keys_match_like_the_layout_says() {
        let table = TableDef::new(
            "t",
            vec![
                ColumnDef::new("a", ColumnType::VarChar(10)).nullable(),
                ColumnDef::new("k1", ColumnType::VarBinary(3)),
                ColumnDef::new("id", ColumnType::SmallInt { unsigned: true }),
                ColumnDef::new("b", ColumnType::BigInt { unsigned: true }).default_value(7u64),
                ColumnDef::new("k2", ColumnType::VarBinary(2)),
            ],
            &["k2", "id", "k1"],
        )
        .unwrap();
        check(table, |rng| {
            vec![
                bytes(rng, 2),
                Value::UInt(rng.random_range(0..3)),
                bytes(rng, 3),
            ]
        });
    }

    #[test]
    fn fixed_keys_are_a_prefix_compare() {
        let table = TableDef::new(
            "f",
            vec![
                ColumnDef::new("v", ColumnType::VarChar(4)).nullable(),
                ColumnDef::new("k", ColumnType::Int { unsigned: true }),
            ],
            &["k"],
        )
        .unwrap();
        let layout = RowLayout::new(&table);
        assert_eq!(KeyMatcher::new(&layout).prefix_len(), Some(4));
        check(table, |rng| vec![Value::UInt(rng.random_range(0..20))]);
    }
}
