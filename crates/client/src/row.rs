//! [`Row`]: an attribute list of some columns of a table, from any source
//! (a read's raw answer, a replica page), checked once when parsed
//! (structure, column ids, value sizes) and indexed by column id then, so
//! every accessor is O(1) without copying the values out of the list.
//!
//! Reads through a [`Record`](crate::Record) land in a
//! [`RowBuf`](crate::RowBuf) instead, laid out by the record; a `Row` is
//! for attribute lists no record describes.

use crate::attr_reader::{read_u16, AttrReader};
use crate::column_access::{all_column_accessors, Column};
use crate::record::Table;
use shoal_types::layout::NULL_LEN;
use shoal_types::value::validate_bytes;
use shoal_types::{ErrorCode, ShoalError, Value};
use std::fmt;

/// Marks a column the list does not hold in [`Row`]'s index.
const ABSENT: u32 = u32::MAX;

/// Some columns of one row, as an attribute list. NULL columns decode to
/// [`Value::Null`]; columns the list does not hold are `None` (and an
/// error for the typed accessors).
#[derive(Clone)]
pub struct Row {
    table: Table,
    /// An attribute list, validated in [`Row::parse`].
    data: Vec<u8>,
    /// Per table column id, the offset in `data` of its attribute's
    /// header, or [`ABSENT`].
    index: Vec<u32>,
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
    /// Checks an attribute list of columns of `table` and indexes it, in
    /// one pass. Everything the accessors later rely on is checked here,
    /// so they cannot panic on bad input from the network. Errors
    /// (`ProtocolViolation`): a truncated list, trailing bytes, an
    /// unknown or repeated column id, a value of the wrong size or out of
    /// range.
    pub fn parse(table: Table, data: Vec<u8>) -> Result<Row, ShoalError> {
        let bad = |what: String| {
            ShoalError::with_detail(
                ErrorCode::ProtocolViolation,
                format!("read result for table {:?}: {what}", table.name()),
            )
        };
        let columns = &table.def().columns;
        let mut index = vec![ABSENT; columns.len()];
        let mut reader = AttrReader::new(&data).map_err(|e| bad(e.into()))?;
        while let Some(attr) = reader.next_attr().map_err(|e| bad(e.into()))? {
            let col = attr.col as usize;
            let cdef = columns
                .get(col)
                .ok_or_else(|| bad(format!("unknown column id {col}")))?;
            if index[col] != ABSENT {
                return Err(bad(format!("column id {col} twice")));
            }
            index[col] = u32::try_from(attr.at)
                .ok()
                .filter(|&at| at != ABSENT)
                .ok_or_else(|| bad("attribute list too large".into()))?;
            if let Some(b) = attr.value {
                validate_bytes(cdef, b).map_err(|e| bad(e.detail))?;
            }
        }
        if reader.trailing() > 0 {
            return Err(bad(format!(
                "{} bytes after the attribute list",
                reader.trailing()
            )));
        }
        Ok(Row { table, data, index })
    }

    /// The value of the column called `name` (see [`Row::get_idx`]).
    pub fn get(&self, name: &str) -> Option<Value> {
        self.get_idx(self.table.column(name)?)
    }

    /// Every column held as `(column id, value)`, in the list's order.
    pub fn values(&self) -> Vec<(u16, Value)> {
        let mut out = Vec::with_capacity(self.len());
        let Ok(mut reader) = AttrReader::new(&self.data) else {
            return out;
        };
        while let Ok(Some(attr)) = reader.next_attr() {
            if let Some(v) = self.get_idx(attr.col) {
                out.push((attr.col, v));
            }
        }
        out
    }

    /// Number of columns held.
    pub fn len(&self) -> usize {
        read_u16(&self.data, 0).map_or(0, usize::from)
    }

    /// True when the list holds no column.
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

    all_column_accessors!();

    fn table_name(&self) -> &str {
        self.table.name()
    }

    /// Column `col`, in O(1) through the index.
    #[inline]
    fn column(&self, col: u16) -> Option<Column<'_>> {
        let bytes = self.column_bytes(col)?;
        let def = self.table.def().columns.get(col as usize)?;
        Some(Column { def, bytes })
    }

    /// The bytes of column `col` (`Some(None)`: NULL), if the row holds it.
    #[inline]
    fn column_bytes(&self, col: u16) -> Option<Option<&[u8]>> {
        let at = *self.index.get(col as usize)?;
        if at == ABSENT {
            return None;
        }
        let at = at as usize;
        let len = read_u16(&self.data, at + 2)?;
        if len == NULL_LEN {
            Some(None)
        } else {
            Some(Some(self.data.get(at + 4..at + 4 + len as usize)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::{attr_list as attrs, table};

    #[test]
    fn indexes_once_and_reads_typed() {
        let t = table();
        let data = attrs(&[
            (3, Some(&7u64.to_le_bytes())),
            (2, None),
            (1, Some(b"key")),
            (5, Some(&(-2i16).to_le_bytes())),
        ]);
        let row = Row::parse(t, data).unwrap();
        assert_eq!(row.len(), 4);
        assert_eq!(row.get("k1"), Some(Value::UInt(7)));
        assert_eq!(row.get("name"), Some(Value::Null));
        assert_eq!(row.get("k2"), Some(Value::Str("key".into())));
        assert_eq!(row.get_idx(5), Some(Value::Int(-2)));
        assert_eq!(row.get("a"), None, "not read");
        assert_eq!(row.get("nope"), None);
        assert_eq!(row.get_idx(99), None);
        assert_eq!(row.get_u64(3).unwrap(), Some(7));
        assert_eq!(row.get_str(1).unwrap(), Some("key"));
        assert_eq!(row.get_i16(5).unwrap(), Some(-2));
        assert!(row.is_null(2).unwrap());
        assert_eq!(row.get_u16(5).unwrap_err().code, ErrorCode::BadRequest);
        assert_eq!(row.get_i32(0).unwrap_err().code, ErrorCode::NoSuchColumn);
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
            attrs(&[(2, None), (2, None)]),  // twice
            vec![1, 0, 3, 0],                // truncated
        ];
        for data in bad {
            let err = Row::parse(t.clone(), data).unwrap_err();
            assert_eq!(err.code, ErrorCode::ProtocolViolation);
        }
        let mut extra = attrs(&[]);
        extra.push(0);
        assert!(Row::parse(t.clone(), extra).is_err());
        assert!(Row::parse(t, attrs(&[])).unwrap().is_empty());
    }
}
