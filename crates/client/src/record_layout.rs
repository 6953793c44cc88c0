//! Where each column of a [`Record`](crate::Record) sits in a
//! [`RowBuf`](crate::RowBuf), worked out once per record so that filling a
//! row and reading one of its columns are plain offset arithmetic, like
//! the column offsets NDB's NdbRecord fixes when the record is created.
//!
//! A filled row buffer is, with every integer little-endian:
//!
//! | part | bytes |
//! |---|---|
//! | null bitmap | `ceil(n / 8)`; bit `i % 8` of byte `i / 8` is set when the record's `i`-th column is NULL |
//! | fixed slots | one per record column, in record order: a fixed-size column's canonical bytes; for a VARCHAR/VARBINARY column an 8-byte entry, `u32 offset` of its bytes in the buffer and `u32 length` |
//! | variable bytes | the VARCHAR/VARBINARY values, one after another |
//!
//! Invariants: slots do not overlap and end at [`RecordLayout::fixed_end`];
//! a row buffer never holds more than [`RecordLayout::row_bytes_max`]
//! bytes (every value is checked against its column's size before it is
//! copied in).
//!
//! The layout also knows the *plain* answer of a record whose columns are
//! all fixed-size with no range to check: every column in record order,
//! none NULL. Such an answer is a fixed string of headers with values of
//! known sizes between them ([`RecordLayout::plain_answer_bytes`],
//! [`Slot::plain_header`]), so checking it is one length comparison and
//! one 4-byte comparison per column.

use shoal_types::layout::NULL_LEN;
use shoal_types::TableDef;

/// Bytes of the fixed slot of a variable-size column: `u32` offset and
/// `u32` length of its bytes.
pub(crate) const VAR_ENTRY_BYTES: usize = 8;

/// One record column's place in a row buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    /// The column id in the table.
    pub col: u16,
    /// The column's index in the record (its null bit).
    pub position: u16,
    /// Offset of the value (fixed-size column) or of its var entry.
    pub offset: usize,
    /// The value's size for a fixed-size column; `None` for VARCHAR and
    /// VARBINARY (their size sits in the var entry).
    pub fixed_size: Option<usize>,
    /// The column's attribute header in a plain answer (`u16 column id`
    /// and `u16 length`, read as one little-endian `u32`); `None` when the
    /// column has no plain form (variable size, or a range to check).
    pub plain_header: Option<u32>,
}

#[derive(Debug)]
pub(crate) struct RecordLayout {
    /// One slot per record column, in record order.
    slots: Vec<Slot>,
    /// Index in `slots` by table column id (`u16::MAX`: not in the
    /// record), so an accessor finds a column in O(1).
    by_column: Vec<u16>,
    /// Where the fixed slots end and the variable bytes begin.
    pub fixed_end: usize,
    /// The largest a filled buffer can be.
    pub row_bytes_max: usize,
    /// The size of the plain answer, when every column has a plain form.
    pub plain_answer_bytes: Option<usize>,
}

/// Marks a table column the record does not hold.
const ABSENT: u16 = u16::MAX;

impl RecordLayout {
    /// Lays out `columns` (distinct ids of `def`'s columns, in record
    /// order).
    pub fn new(def: &TableDef, columns: &[u16]) -> RecordLayout {
        let null_bytes = columns.len().div_ceil(8);
        let mut offset = null_bytes;
        let mut var_bytes_max = 0usize;
        let mut by_column = vec![ABSENT; def.columns.len()];
        let mut slots = Vec::with_capacity(columns.len());
        // The answer's count, then per column a header and the value.
        let mut plain_answer_bytes = Some(2usize);
        for (position, &col) in columns.iter().enumerate() {
            let ty = def.columns[col as usize].ty;
            let fixed_size = ty.fixed_size();
            // Types with a range (DATETIME, DATE, ...) go through
            // `validate_bytes`.
            let plain_header = fixed_size
                .filter(|&n| n < NULL_LEN as usize && !ty.has_range())
                .map(|n| u32::from(col) | (n as u32) << 16);
            plain_answer_bytes = match (plain_answer_bytes, fixed_size, plain_header) {
                (Some(b), Some(n), Some(_)) => Some(b + 4 + n),
                _ => None,
            };
            slots.push(Slot {
                col,
                position: position as u16,
                offset,
                fixed_size,
                plain_header,
            });
            by_column[col as usize] = position as u16;
            match fixed_size {
                Some(n) => offset += n,
                None => {
                    offset += VAR_ENTRY_BYTES;
                    var_bytes_max += ty.max_size();
                }
            }
        }
        RecordLayout {
            slots,
            by_column,
            fixed_end: offset,
            row_bytes_max: offset + var_bytes_max,
            plain_answer_bytes: plain_answer_bytes.filter(|_| columns.len() <= u16::MAX as usize),
        }
    }

    /// Every slot, in record order.
    #[inline]
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// The slot of the record's `position`-th column.
    #[inline]
    pub fn slot_at(&self, position: usize) -> Option<&Slot> {
        self.slots.get(position)
    }

    /// The slot of table column `col`, if the record holds it.
    #[inline]
    pub fn slot_of(&self, col: u16) -> Option<&Slot> {
        match self.by_column.get(col as usize) {
            Some(&p) if p != ABSENT => self.slots.get(p as usize),
            _ => None,
        }
    }

    /// Number of columns in the record.
    pub fn len(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::table;

    #[test]
    fn lays_out_null_bits_fixed_slots_and_var_entries() {
        let t = table();
        // name VARCHAR(4), k1 BIGINT UNSIGNED, req SMALLINT, k2 VARCHAR(8)
        let l = RecordLayout::new(t.def(), &[2, 3, 5, 1]);
        // One byte of null bits, then the slots.
        let offsets: Vec<(u16, usize, Option<usize>)> = (0..4)
            .filter_map(|p| l.slot_at(p))
            .map(|s| (s.col, s.offset, s.fixed_size))
            .collect();
        assert_eq!(
            offsets,
            vec![
                (2, 1, None),
                (3, 9, Some(8)),
                (5, 17, Some(2)),
                (1, 19, None)
            ]
        );
        assert_eq!(l.fixed_end, 27);
        assert_eq!(l.row_bytes_max, 27 + 4 + 8);
        assert_eq!(l.slot_of(5).map(|s| s.position), Some(2));
        assert!(l.slot_of(0).is_none(), "not in the record");
        assert!(l.slot_of(99).is_none(), "not in the table");
        assert_eq!(RecordLayout::new(t.def(), &[]).fixed_end, 0);
    }
}
