//! Tables and records: a [`Table`] is a table definition with its row
//! layout; a [`Record`] is a table plus an ordered list of columns, worked
//! out once (where the key columns sit, which columns travel as attributes,
//! the encoded read column list) and reused for every row, like NDB's
//! NdbRecord.
//!
//! This module also turns a record and values into the wire's [`KeyOp`],
//! validating every value on the way, so a bad value fails in the caller's
//! hands before anything is sent. The checks and error codes are the ones
//! the data node applies (both sides use `shoal_types`' encoders).
//!
//! Encodings (see `shoal_types::layout`): the key is exactly
//! [`RowLayout::encode_key`] of the key values in key order; a write's
//! attributes are an attribute list of the record's non-key columns; a
//! read's attributes are `u16 count` + `count` × `u16 column id`, or
//! `0xFFFF` alone for all columns.

use crate::error::bad_request;
use crate::record_layout::RecordLayout;
use shoal_types::distribution::{distribution_key, distribution_key_of_values, DistributionMap};
use shoal_types::hash_key;
use shoal_types::value::encode_value;
use shoal_types::{ErrorCode, RowLayout, SchemaVersion, ShoalError, TableDef, TableId, Value};
use shoal_wire::{KeyOp, LockMode, OpType, ALL_COLUMNS};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// Length marker of a NULL attribute (`shoal_types::layout::NULL_LEN`).
const NULL_LEN: u16 = 0xFFFF;

/// A table as the client knows it: its definition (id and schema version
/// included) and its row layout. Cheap to clone (an `Arc` inside).
#[derive(Clone)]
pub struct Table {
    inner: Arc<TableInner>,
}

struct TableInner {
    layout: RowLayout,
    /// Where the table's rows live (from mgmd), to start a transaction at
    /// the node that holds the primary of its first key.
    map: Option<DistributionMap>,
    /// The replicas of every fragment, when they are the same nodes in the
    /// same order for all (one data node, or one node group with one
    /// replica): then no key needs hashing to be routed.
    uniform_replicas: Option<Box<[u16]>>,
    /// The spec of [`Table::full_record`], built once.
    full: Arc<RecordSpec>,
    /// Column ids by name, so that looking a column up by name (as
    /// `RowBuf::get` does for every call) does not scan the columns.
    by_name: HashMap<Box<str>, u16>,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name())
            .field("id", &self.id())
            .field("version", &self.version())
            .finish()
    }
}

impl Table {
    /// Wraps a definition fetched from (or created by) mgmd.
    pub fn new(def: TableDef) -> Table {
        let layout = RowLayout::new(&def);
        let all: Vec<u16> = (0..def.columns.len() as u16).collect();
        let full = Arc::new(RecordSpec::new(&def, all, true));
        let map = def.distribution.as_ref().and_then(|d| d.map().ok());
        let uniform_replicas = map.as_ref().and_then(|m| {
            let first = m.replicas(0);
            let fragments = m.fragments.len() as u32;
            (fragments > 0 && (1..fragments).all(|f| m.replicas(f) == first)).then(|| first.into())
        });
        let mut by_name = HashMap::with_capacity(def.columns.len());
        for (i, c) in def.columns.iter().enumerate() {
            // The first of two same-named columns wins, as in
            // `TableDef::column_index` (mgmd refuses such tables anyway).
            by_name.entry(c.name.as_str().into()).or_insert(i as u16);
        }
        Table {
            inner: Arc::new(TableInner {
                layout,
                map,
                uniform_replicas,
                full,
                by_name,
            }),
        }
    }

    /// The data nodes holding the row with this encoded primary key, in
    /// preferred order (the first of them that is up is the fragment's
    /// primary: data nodes pick it by the same rule), if the table's
    /// distribution is known.
    pub(crate) fn replica_nodes(&self, key: &[u8]) -> Option<&[u16]> {
        if let Some(replicas) = &self.inner.uniform_replicas {
            return Some(replicas);
        }
        let map = self.inner.map.as_ref()?;
        let prefix = self.def().options.distribution_key_columns;
        let dkey = distribution_key(&self.inner.layout, key, prefix).ok()?;
        Some(map.replicas(map.fragment_of(hash_key(dkey))))
    }

    /// How many fragments (NDB's partitions) the table has, if its
    /// distribution is known.
    pub fn fragment_count(&self) -> Option<u32> {
        let map = self.inner.map.as_ref()?;
        u32::try_from(map.fragments.len()).ok()
    }

    /// The fragment holding the rows whose distribution key (the primary
    /// key's first columns, in key order; values past them are ignored)
    /// holds `values`; `None` if the distribution is unknown or the
    /// values do not fix it (too few, a NULL, a value that does not fit).
    pub fn fragment_of_values(&self, values: &[Value]) -> Option<u32> {
        let map = self.inner.map.as_ref()?;
        let key = distribution_key_of_values(self.def(), values)?;
        Some(map.fragment_of(hash_key(&key)))
    }

    /// The data nodes holding each fragment, in preferred order: the
    /// first one up is the fragment's primary.
    pub fn fragment_replicas(&self) -> Option<Vec<Vec<u16>>> {
        let map = self.inner.map.as_ref()?;
        Some(
            (0..map.fragments.len() as u32)
                .map(|f| map.replicas(f).to_vec())
                .collect(),
        )
    }

    /// The table definition.
    pub fn def(&self) -> &TableDef {
        &self.inner.layout.table
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.def().name
    }

    /// The table id assigned by mgmd.
    pub fn id(&self) -> TableId {
        self.def().id
    }

    /// The schema version every operation on this table carries.
    pub fn version(&self) -> SchemaVersion {
        self.def().version
    }

    /// The id of the column called `name` (a hash lookup).
    pub fn column(&self, name: &str) -> Option<u16> {
        self.inner.by_name.get(name).copied()
    }

    /// The id of the column called `name`, or `NoSuchColumn` naming the
    /// table and the column (for building filters by column name).
    pub fn column_id(&self, name: &str) -> Result<u16, ShoalError> {
        self.column(name).ok_or_else(|| {
            ShoalError::with_detail(
                ErrorCode::NoSuchColumn,
                format!("table {:?} has no column {name:?}", self.name()),
            )
        })
    }

    /// The row layout (shared with the data nodes' encoding rules).
    pub fn layout(&self) -> &RowLayout {
        &self.inner.layout
    }

    /// A record of the named columns, in this order. Writes through it must
    /// include every primary-key column; reads return these columns.
    /// Errors: an unknown name (`NoSuchColumn`), a name given twice
    /// (`BadRequest`).
    pub fn record(&self, columns: &[&str]) -> Result<Record, ShoalError> {
        let mut ids = Vec::with_capacity(columns.len());
        for name in columns {
            let id = self.column_id(name)?;
            if ids.contains(&id) {
                return Err(bad_request(format!(
                    "column {name:?} appears twice in the record"
                )));
            }
            ids.push(id);
        }
        Ok(Record {
            table: self.clone(),
            spec: Arc::new(RecordSpec::new(self.def(), ids, false)),
        })
    }

    /// A record of every column in table order; reads through it ask the
    /// data node for all columns.
    pub fn full_record(&self) -> Record {
        Record {
            table: self.clone(),
            spec: self.inner.full.clone(),
        }
    }

    /// True when both handles describe the same table id and version.
    pub fn same_version(&self, other: &Table) -> bool {
        self.id() == other.id() && self.version() == other.version()
    }
}

/// A table plus an ordered list of column ids, described once and reused
/// for every row. Values passed with a record follow its column order.
/// Cheap to clone.
#[derive(Clone)]
pub struct Record {
    table: Table,
    spec: Arc<RecordSpec>,
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record")
            .field("table", &self.table.name())
            .field("columns", &self.spec.columns)
            .finish()
    }
}

/// Everything about a column list that encoding needs, computed once.
struct RecordSpec {
    columns: Vec<u16>,
    /// For each key column in key order, its position in `columns`
    /// (`None` when the record lacks it: such a record cannot write).
    key_positions: Vec<Option<usize>>,
    /// `Some(p)` when the key columns sit at `columns[p..p + n]` in key
    /// order, so the key values are a sub-slice of the caller's values.
    key_run: Option<usize>,
    /// Positions in `columns` of the non-key columns, with their ids.
    attrs: Vec<(usize, u16)>,
    /// The encoded read column list.
    read_list: Vec<u8>,
    /// A NOT NULL column without a default that the record lacks: an
    /// insert through this record would fail with `IllegalNull`.
    missing_required: Option<u16>,
    /// Where each column sits in a [`RowBuf`](crate::RowBuf) read through
    /// this record.
    layout: RecordLayout,
}

impl RecordSpec {
    fn new(def: &TableDef, columns: Vec<u16>, all: bool) -> RecordSpec {
        let key_positions: Vec<Option<usize>> = def
            .primary_key
            .iter()
            .map(|k| columns.iter().position(|c| c == k))
            .collect();
        let key_run = match key_positions.first() {
            Some(Some(p0))
                if key_positions
                    .iter()
                    .enumerate()
                    .all(|(i, p)| *p == Some(p0 + i)) =>
            {
                Some(*p0)
            }
            _ => None,
        };
        let attrs = columns
            .iter()
            .enumerate()
            .filter(|(_, c)| !def.is_key_column(**c))
            .map(|(p, c)| (p, *c))
            .collect();
        let read_list = if all {
            ALL_COLUMNS.to_le_bytes().to_vec()
        } else {
            let mut l = Vec::with_capacity(2 + 2 * columns.len());
            l.extend_from_slice(&(columns.len() as u16).to_le_bytes());
            for c in &columns {
                l.extend_from_slice(&c.to_le_bytes());
            }
            l
        };
        let missing_required = def
            .columns
            .iter()
            .enumerate()
            .find(|(i, c)| {
                !c.nullable
                    && c.default.as_ref().is_none_or(Value::is_null)
                    && !columns.contains(&(*i as u16))
            })
            .map(|(i, _)| i as u16);
        let layout = RecordLayout::new(def, &columns);
        RecordSpec {
            layout,
            columns,
            key_positions,
            key_run,
            attrs,
            read_list,
            missing_required,
        }
    }
}

impl Record {
    /// The record's table.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The record's column ids, in value order.
    pub fn columns(&self) -> &[u16] {
        &self.spec.columns
    }

    /// Where column `col` sits in a row buffer laid out by this record
    /// ([`RowBuf::as_bytes`](crate::RowBuf::as_bytes)): the offset of its
    /// value (a fixed-size column, in its canonical bytes) or of its
    /// `u32 offset, u32 length` entry (VARCHAR, VARBINARY); `None` if the
    /// record does not hold it. NDB's `NdbDictionary::getOffset`.
    pub fn offset_of(&self, col: u16) -> Option<usize> {
        self.layout().slot_of(col).map(|s| s.offset)
    }

    /// The bit of the row buffer's null bitmap set when column `col` is
    /// NULL (bit `n % 8` of byte `n / 8`); `None` if the record does not
    /// hold it. NDB's `NdbDictionary::getNullBitOffset`.
    pub fn null_bit_of(&self, col: u16) -> Option<usize> {
        self.layout().slot_of(col).map(|s| usize::from(s.position))
    }

    /// True when the record holds every primary-key column.
    pub fn has_key(&self) -> bool {
        self.spec.key_positions.iter().all(Option::is_some)
    }

    /// The encoded column list a read through this record asks for
    /// (`u16 count` + column ids, or `0xFFFF` for a full record).
    pub(crate) fn read_list(&self) -> &[u8] {
        &self.spec.read_list
    }

    /// Where each column sits in a row buffer read through this record.
    pub(crate) fn layout(&self) -> &RecordLayout {
        &self.spec.layout
    }

    /// True when both handles are the same record of the same table
    /// handle (clones of one another): a row buffer laid out by one is
    /// laid out by the other.
    pub(crate) fn same_as(&self, other: &Record) -> bool {
        Arc::ptr_eq(&self.spec, &other.spec) && Arc::ptr_eq(&self.table.inner, &other.table.inner)
    }

    /// Encodes an insert, update or write (upsert) of one row.
    pub(crate) fn encode_write(&self, op: OpType, values: &[Value]) -> Result<KeyOp, ShoalError> {
        debug_assert!(matches!(
            op,
            OpType::Insert | OpType::Update | OpType::Write
        ));
        let spec = &*self.spec;
        let def = self.table.def();
        if values.len() != spec.columns.len() {
            return Err(bad_request(format!(
                "the record has {} column(s), got {} value(s)",
                spec.columns.len(),
                values.len()
            )));
        }
        // The key, then the attributes, in the operation's one buffer.
        let mut key = Vec::with_capacity(16 + 2 + spec.attrs.len() * 12);
        match spec.key_run {
            Some(p) => self
                .table
                .layout()
                .encode_key(&values[p..p + def.primary_key.len()], &mut key)?,
            None => {
                let mut kv = Vec::with_capacity(spec.key_positions.len());
                for (i, pos) in spec.key_positions.iter().enumerate() {
                    let pos = pos.ok_or_else(|| {
                        ShoalError::with_detail(
                            ErrorCode::BadPrimaryKey,
                            format!(
                                "the record lacks primary key column {:?}; writes need the whole key",
                                def.columns[def.primary_key[i] as usize].name
                            ),
                        )
                    })?;
                    kv.push(values[pos].clone());
                }
                self.table.layout().encode_key(&kv, &mut key)?;
            }
        }
        if op == OpType::Insert {
            if let Some(c) = spec.missing_required {
                return Err(ShoalError::with_detail(
                    ErrorCode::IllegalNull,
                    format!(
                        "column {:?} is NOT NULL and has no default; give a value",
                        def.columns[c as usize].name
                    ),
                ));
            }
        }
        let key_len = key.len();
        self.encode_attrs_into(values, &mut key)?;
        Ok(KeyOp::from_buf(
            op,
            LockMode::Exclusive,
            0,
            def.id,
            def.version,
            key,
            key_len,
        ))
    }

    /// The attribute list of a write: the record's non-key columns, in
    /// record order (`values` has one value per record column).
    fn encode_attrs(&self, values: &[Value]) -> Result<Vec<u8>, ShoalError> {
        let mut attrs = Vec::with_capacity(2 + self.spec.attrs.len() * 12);
        self.encode_attrs_into(values, &mut attrs)?;
        Ok(attrs)
    }

    /// [`Record::encode_attrs`], appended to `attrs`.
    fn encode_attrs_into(&self, values: &[Value], attrs: &mut Vec<u8>) -> Result<(), ShoalError> {
        let spec = &*self.spec;
        let def = self.table.def();
        attrs.extend_from_slice(&(spec.attrs.len() as u16).to_le_bytes());
        for &(pos, col) in &spec.attrs {
            let cdef = &def.columns[col as usize];
            attrs.extend_from_slice(&col.to_le_bytes());
            let v = &values[pos];
            if v.is_null() {
                if !cdef.nullable {
                    return Err(ShoalError::with_detail(
                        ErrorCode::IllegalNull,
                        format!("column {:?} is NOT NULL", cdef.name),
                    ));
                }
                attrs.extend_from_slice(&NULL_LEN.to_le_bytes());
            } else {
                let len_at = attrs.len();
                attrs.extend_from_slice(&[0, 0]);
                encode_value(cdef, v, attrs)?;
                let len = attrs.len() - len_at - 2;
                // Column sizes are capped far below the NULL marker by
                // `TableDef::validate`.
                assert!(len < NULL_LEN as usize);
                attrs[len_at..len_at + 2].copy_from_slice(&(len as u16).to_le_bytes());
            }
        }
        Ok(())
    }

    /// Encodes an update by unique key of this record's columns, all set
    /// (the record holds no primary-key column: the row keeps its key).
    pub(crate) fn encode_update_unique(
        &self,
        index: &crate::unique::UniqueIndex,
        key: &[Value],
        values: &[Value],
    ) -> Result<KeyOp, ShoalError> {
        let def = self.table.def();
        index.check_table(&self.table)?;
        if let Some(&k) = def
            .primary_key
            .iter()
            .find(|k| self.spec.columns.contains(k))
        {
            return Err(bad_request(format!(
                "update_unique: the record holds primary key column {:?}; a row found by unique key keeps its primary key, so give a record of only the columns to set",
                def.columns[k as usize].name
            )));
        }
        if self.spec.columns.is_empty() {
            return Err(bad_request("update_unique: the record sets no column"));
        }
        if values.len() != self.spec.columns.len() {
            return Err(bad_request(format!(
                "the record has {} column(s), got {} value(s)",
                self.spec.columns.len(),
                values.len()
            )));
        }
        index.key_op(
            OpType::Update,
            LockMode::Exclusive,
            key,
            self.encode_attrs(values)?,
            def.version,
        )
    }

    /// Encodes a read of this record's columns by unique key.
    pub(crate) fn encode_read_unique(
        &self,
        index: &crate::unique::UniqueIndex,
        key: &[Value],
        lock: LockMode,
    ) -> Result<KeyOp, ShoalError> {
        index.check_table(&self.table)?;
        index.key_op(
            OpType::Read,
            lock,
            key,
            self.spec.read_list.clone(),
            self.table.version(),
        )
    }

    /// Encodes a primary-key read of this record's columns.
    pub(crate) fn encode_read(&self, key: &[Value], lock: LockMode) -> Result<KeyOp, ShoalError> {
        let def = self.table.def();
        let read_list = &self.spec.read_list;
        let mut k = Vec::with_capacity(16 + read_list.len());
        self.table.layout().encode_key(key, &mut k)?;
        let key_len = k.len();
        k.extend_from_slice(read_list);
        Ok(KeyOp::from_buf(
            OpType::Read,
            lock,
            0,
            def.id,
            def.version,
            k,
            key_len,
        ))
    }
}

/// Encodes a primary-key delete.
pub(crate) fn encode_delete(table: &Table, key: &[Value]) -> Result<KeyOp, ShoalError> {
    let def = table.def();
    let mut k = Vec::with_capacity(16);
    table.layout().encode_key(key, &mut k)?;
    let key_len = k.len();
    Ok(KeyOp::from_buf(
        OpType::Delete,
        LockMode::Exclusive,
        0,
        def.id,
        def.version,
        k,
        key_len,
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use shoal_types::layout::AttrSlice;
    use shoal_types::value::decode_value;
    use shoal_types::{ColumnDef, ColumnType};

    /// `t(a INT, k2 VARCHAR(8) , name VARCHAR(4) NULL, k1 BIGINT UNSIGNED,
    /// n INT NOT NULL DEFAULT 5, req SMALLINT NOT NULL)`, key `(k1, k2)`.
    /// An attribute list of `list` (column id, value bytes or NULL), as a
    /// data node sends one.
    pub(crate) fn attr_list(list: &[(u16, Option<&[u8]>)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = shoal_types::layout::AttrListWriter::begin(&mut out);
        for (c, v) in list {
            w.push(&mut out, *c, *v);
        }
        w.finish(&mut out);
        out
    }

    pub(crate) fn table() -> Table {
        let mut def = TableDef::new(
            "t",
            vec![
                ColumnDef::new("a", ColumnType::Int { unsigned: false }).nullable(),
                ColumnDef::new("k2", ColumnType::VarChar(8)),
                ColumnDef::new("name", ColumnType::VarChar(4)).nullable(),
                ColumnDef::new("k1", ColumnType::BigInt { unsigned: true }),
                ColumnDef::new("n", ColumnType::Int { unsigned: false }).default_value(5i64),
                ColumnDef::new("req", ColumnType::SmallInt { unsigned: false }),
            ],
            &["k1", "k2"],
        )
        .unwrap();
        def.id = TableId(7);
        def.version = SchemaVersion(3);
        Table::new(def)
    }

    #[test]
    fn the_fragment_of_key_values_is_the_one_their_encoded_key_routes_to() {
        use shoal_types::distribution::{distribution_key, DistributionSpec};
        use shoal_types::hash_key;
        for prefix in [None, Some(1)] {
            let mut def = table().def().clone();
            def.distribution = Some(DistributionSpec {
                version: 1,
                node_groups: vec![vec![1, 2], vec![3, 4]],
                fragments_per_group: 2,
            });
            def.options.distribution_key_columns = prefix;
            let t = Table::new(def);
            assert_eq!(t.fragment_count(), Some(4));
            let map = t.inner.map.as_ref().unwrap();
            let mut seen = std::collections::BTreeSet::new();
            for i in 0..200u64 {
                let values = [Value::UInt(i), Value::Str(format!("k{i}"))];
                let key = key_bytes(&t, &values);
                let dkey = distribution_key(&t.inner.layout, &key, prefix).unwrap();
                let want = map.fragment_of(hash_key(dkey));
                assert_eq!(t.fragment_of_values(&values), Some(want), "{prefix:?} {i}");
                if prefix.is_some() {
                    assert_eq!(t.fragment_of_values(&values[..1]), Some(want));
                }
                seen.insert(want);
            }
            assert_eq!(seen.len(), 4);
            assert_eq!(t.fragment_of_values(&[Value::Null, Value::from("k")]), None);
            if prefix.is_none() {
                assert_eq!(t.fragment_of_values(&[Value::UInt(1)]), None, "too few");
            }
        }
        assert_eq!(
            table().fragment_of_values(&[Value::UInt(1), Value::from("k")]),
            None
        );
    }

    #[test]
    fn routes_keys_to_their_fragments_replicas() {
        use shoal_types::distribution::DistributionSpec;
        use shoal_types::hash_key;
        let with = |spec: DistributionSpec| {
            let mut def = table().def().clone();
            def.distribution = Some(spec);
            Table::new(def)
        };
        let keys: Vec<Vec<u8>> = (0..200u64)
            .map(|i| key_bytes(&table(), &[Value::UInt(i), Value::Str(format!("k{i}"))]))
            .collect();
        // One node, or one group of one: every key on the same nodes.
        for spec in [
            DistributionSpec::single_node(3, 8),
            DistributionSpec {
                version: 1,
                node_groups: vec![vec![1]],
                fragments_per_group: 4,
            },
        ] {
            let t = with(spec);
            assert!(t.inner.uniform_replicas.is_some());
            let want = t.inner.map.as_ref().unwrap().replicas(0).to_vec();
            for k in &keys {
                assert_eq!(t.replica_nodes(k), Some(&want[..]));
            }
        }
        // Two groups of two: each key on its fragment's replicas, in the
        // fragment's preferred order, as the data nodes route it.
        let t = with(DistributionSpec {
            version: 1,
            node_groups: vec![vec![1, 2], vec![3, 4]],
            fragments_per_group: 2,
        });
        assert!(t.inner.uniform_replicas.is_none());
        let map = t.inner.map.as_ref().unwrap();
        let mut seen = std::collections::HashSet::new();
        for k in &keys {
            let want = map.replicas(map.fragment_of(hash_key(k)));
            assert_eq!(t.replica_nodes(k), Some(want));
            seen.insert(want.to_vec());
        }
        assert_eq!(seen.len(), 4, "every fragment's order met: {seen:?}");
        assert_eq!(
            table().replica_nodes(&keys[0]),
            None,
            "no distribution known"
        );
    }

    fn key_bytes(t: &Table, key: &[Value]) -> Vec<u8> {
        let mut k = Vec::new();
        t.layout().encode_key(key, &mut k).unwrap();
        k
    }

    #[test]
    fn write_encodes_key_and_non_key_attrs() {
        let t = table();
        // Key columns out of key order and not adjacent: the slow path.
        let rec = t.record(&["name", "k2", "req", "k1", "a"]).unwrap();
        let vals = [
            Value::from("ab"),
            Value::from("key"),
            Value::Int(-3),
            Value::UInt(42),
            Value::Null,
        ];
        for op in [OpType::Insert, OpType::Update, OpType::Write] {
            let kop = rec.encode_write(op, &vals).unwrap();
            assert_eq!(kop.op, op);
            assert_eq!(kop.table, TableId(7));
            assert_eq!(kop.version, SchemaVersion(3));
            assert_eq!(kop.key(), key_bytes(&t, &[Value::UInt(42), "key".into()]));
            let (attrs, rest) = AttrSlice::parse(kop.attrs()).unwrap();
            assert!(rest.is_empty());
            let got: Vec<(u16, Option<Value>)> = attrs
                .iter()
                .map(|(c, v)| {
                    (
                        c,
                        v.map(|b| decode_value(t.def().columns[c as usize].ty, b)),
                    )
                })
                .collect();
            assert_eq!(
                got,
                vec![
                    (2, Some(Value::from("ab"))),
                    (5, Some(Value::Int(-3))),
                    (0, None)
                ],
                "attrs follow record order and leave the key out"
            );
        }
        // Key columns adjacent and in key order: the sub-slice path.
        let rec = t.record(&["req", "k1", "k2"]).unwrap();
        let kop = rec
            .encode_write(OpType::Insert, &[Value::Int(1), Value::UInt(9), "z".into()])
            .unwrap();
        assert_eq!(kop.key(), key_bytes(&t, &[Value::UInt(9), "z".into()]));
        let (attrs, _) = AttrSlice::parse(kop.attrs()).unwrap();
        assert_eq!(attrs.iter().map(|(c, _)| c).collect::<Vec<_>>(), vec![5]);
    }

    #[test]
    fn read_and_delete_encoding() {
        let t = table();
        let key = [Value::UInt(1), Value::from("x")];
        let rec = t.record(&["name", "k1"]).unwrap();
        let kop = rec.encode_read(&key, LockMode::Shared).unwrap();
        assert_eq!(kop.op, OpType::Read);
        assert_eq!(kop.lock, LockMode::Shared);
        assert_eq!(kop.key(), key_bytes(&t, &key));
        assert_eq!(kop.attrs(), vec![2, 0, 2, 0, 3, 0]);
        let full = t
            .full_record()
            .encode_read(&key, LockMode::CommittedRead)
            .unwrap();
        assert_eq!(full.attrs(), vec![0xFF, 0xFF]);
        let del = encode_delete(&t, &key).unwrap();
        assert_eq!(del.op, OpType::Delete);
        assert_eq!(del.key(), key_bytes(&t, &key));
        assert!(del.attrs().is_empty());
    }

    #[test]
    fn client_side_validation() {
        let t = table();
        let full = t.full_record();
        let good = || {
            vec![
                Value::Int(1),
                Value::from("k"),
                Value::Null,
                Value::UInt(1),
                Value::Int(2),
                Value::Int(3),
            ]
        };
        assert!(full.encode_write(OpType::Insert, &good()).is_ok());
        let code = |r: Result<KeyOp, ShoalError>| r.unwrap_err().code;
        // Wrong number of values.
        assert_eq!(
            code(full.encode_write(OpType::Insert, &good()[..5])),
            ErrorCode::BadRequest
        );
        // Wrong number of key values.
        assert_eq!(
            code(full.encode_read(&[Value::UInt(1)], LockMode::Shared)),
            ErrorCode::BadPrimaryKey
        );
        assert_eq!(code(encode_delete(&t, &[])), ErrorCode::BadPrimaryKey);
        // Wrong type, out of range, too long.
        let mut v = good();
        v[0] = Value::from("not a number");
        assert_eq!(
            code(full.encode_write(OpType::Update, &v)),
            ErrorCode::BadValue
        );
        let mut v = good();
        v[5] = Value::Int(70_000);
        assert_eq!(
            code(full.encode_write(OpType::Write, &v)),
            ErrorCode::BadValue
        );
        let mut v = good();
        v[2] = Value::from("too long");
        assert_eq!(
            code(full.encode_write(OpType::Insert, &v)),
            ErrorCode::ValueTooLong
        );
        let mut v = good();
        v[1] = Value::from("key too long");
        assert_eq!(
            code(full.encode_write(OpType::Insert, &v)),
            ErrorCode::ValueTooLong
        );
        // NULL into the key and into a NOT NULL column.
        let mut v = good();
        v[3] = Value::Null;
        assert_eq!(
            code(full.encode_write(OpType::Insert, &v)),
            ErrorCode::IllegalNull
        );
        assert_eq!(
            code(full.encode_read(&[Value::Null, "k".into()], LockMode::Shared)),
            ErrorCode::IllegalNull
        );
        let mut v = good();
        v[5] = Value::Null;
        assert_eq!(
            code(full.encode_write(OpType::Update, &v)),
            ErrorCode::IllegalNull
        );
        // A record without the whole key cannot write.
        let partial = t.record(&["k1", "req"]).unwrap();
        assert!(!partial.has_key());
        assert_eq!(
            code(partial.encode_write(OpType::Write, &[Value::UInt(1), Value::Int(1)])),
            ErrorCode::BadPrimaryKey
        );
        // An insert that leaves out a NOT NULL column without default;
        // update and write may leave it out.
        let no_req = t.record(&["k1", "k2", "n"]).unwrap();
        let vals = [Value::UInt(1), "k".into(), Value::Int(1)];
        assert_eq!(
            code(no_req.encode_write(OpType::Insert, &vals)),
            ErrorCode::IllegalNull
        );
        assert!(no_req.encode_write(OpType::Update, &vals).is_ok());
        assert!(no_req.encode_write(OpType::Write, &vals).is_ok());
        // Bad record definitions.
        assert_eq!(
            t.record(&["nope"]).unwrap_err().code,
            ErrorCode::NoSuchColumn
        );
        assert_eq!(
            t.record(&["a", "a"]).unwrap_err().code,
            ErrorCode::BadRequest
        );
    }
}
