//! A row returned by a read: the attribute list the data node sent, checked
//! once when it arrives (structure, column ids, value sizes) and decoded
//! lazily, one column at a time, when the caller asks.

use crate::record::Table;
use shoal_types::layout::AttrSlice;
use shoal_types::value::{decode_value, validate_bytes};
use shoal_types::{ErrorCode, ShoalError, Value};
use std::fmt;

/// The columns one read returned. NULL columns decode to [`Value::Null`];
/// columns the read did not ask for are `None`.
#[derive(Clone)]
pub struct Row {
    table: Table,
    /// An attribute list, validated in [`Row::new`].
    data: Vec<u8>,
}

impl fmt::Debug for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Row")
            .field("table", &self.table.name())
            .field("values", &self.values())
            .finish()
    }
}

impl Row {
    /// Checks an attribute list received from a data node. Everything the
    /// accessors later rely on is checked here, so they cannot panic on
    /// bad input from the network.
    pub(crate) fn new(table: Table, data: Vec<u8>) -> Result<Row, ShoalError> {
        let bad = |what: String| {
            ShoalError::with_detail(
                ErrorCode::ProtocolViolation,
                format!("read result for table {:?}: {what}", table.name()),
            )
        };
        let (attrs, rest) = AttrSlice::parse(&data).map_err(|e| bad(e.detail))?;
        if !rest.is_empty() {
            return Err(bad(format!(
                "{} bytes after the attribute list",
                rest.len()
            )));
        }
        let columns = &table.def().columns;
        for (col, val) in attrs.iter() {
            let cdef = columns
                .get(col as usize)
                .ok_or_else(|| bad(format!("unknown column id {col}")))?;
            if let Some(b) = val {
                validate_bytes(cdef, b).map_err(|e| bad(e.detail))?;
            }
        }
        Ok(Row { table, data })
    }

    fn attrs(&self) -> AttrSlice<'_> {
        AttrSlice::parse(&self.data)
            .expect("validated in Row::new")
            .0
    }

    /// The value of the column called `col`.
    pub fn get(&self, col: &str) -> Option<Value> {
        self.get_idx(self.table.column(col)?)
    }

    /// The value of the column with id `col`.
    pub fn get_idx(&self, col: u16) -> Option<Value> {
        let ty = self.table.def().columns.get(col as usize)?.ty;
        self.attrs()
            .iter()
            .find(|(c, _)| *c == col)
            .map(|(_, v)| v.map_or(Value::Null, |b| decode_value(ty, b)))
    }

    /// Every returned column as `(column id, value)`, in the order the data
    /// node sent them (the read's column order).
    pub fn values(&self) -> Vec<(u16, Value)> {
        let columns = &self.table.def().columns;
        self.attrs()
            .iter()
            .map(|(c, v)| {
                let val = v.map_or(Value::Null, |b| decode_value(columns[c as usize].ty, b));
                (c, val)
            })
            .collect()
    }

    /// Number of columns returned.
    pub fn len(&self) -> usize {
        self.attrs().len()
    }

    /// True when the read returned no columns.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The table the row belongs to.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The raw attribute list (`shoal_types::layout` format).
    pub fn raw(&self) -> &[u8] {
        &self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::table;
    use shoal_types::layout::AttrListWriter;

    fn attrs(list: &[(u16, Option<&[u8]>)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = AttrListWriter::begin(&mut out);
        for (c, v) in list {
            w.push(&mut out, *c, *v);
        }
        w.finish(&mut out);
        out
    }

    #[test]
    fn decodes_lazily_with_nulls() {
        let t = table();
        let data = attrs(&[
            (3, Some(&7u64.to_le_bytes())),
            (2, None),
            (1, Some(b"key")),
            (5, Some(&(-2i16).to_le_bytes())),
        ]);
        let row = Row::new(t, data).unwrap();
        assert_eq!(row.len(), 4);
        assert_eq!(row.get("k1"), Some(Value::UInt(7)));
        assert_eq!(row.get("name"), Some(Value::Null));
        assert_eq!(row.get("k2"), Some(Value::Str("key".into())));
        assert_eq!(row.get_idx(5), Some(Value::Int(-2)));
        assert_eq!(row.get("a"), None, "not read");
        assert_eq!(row.get("nope"), None);
        assert_eq!(row.get_idx(99), None);
        assert_eq!(
            row.values(),
            vec![
                (3, Value::UInt(7)),
                (2, Value::Null),
                (1, Value::Str("key".into())),
                (5, Value::Int(-2))
            ]
        );
    }

    #[test]
    fn rejects_malformed_results() {
        let t = table();
        let bad = [
            attrs(&[(3, Some(&[1, 2, 3]))]), // BIGINT needs 8 bytes
            attrs(&[(1, Some(&[b'x'; 9]))]), // VARCHAR(8)
            attrs(&[(42, None)]),            // no such column
            vec![1, 0, 3, 0],                // truncated
        ];
        for data in bad {
            let err = Row::new(t.clone(), data).unwrap_err();
            assert_eq!(err.code, ErrorCode::ProtocolViolation);
        }
        let mut extra = attrs(&[]);
        extra.push(0);
        assert!(Row::new(t.clone(), extra).is_err());
        assert!(Row::new(t, attrs(&[])).unwrap().is_empty());
    }
}
