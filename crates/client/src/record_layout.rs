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
//! known sizes between them, each at a position fixed by the record
//! ([`RecordLayout::plain_answer_bytes`], [`PlainColumn`]), so checking it
//! is one length comparison and one 4-byte comparison per column.

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
}

/// One column of a plain answer: where its header sits in the answer (its
/// value follows), what the header must be, and where the value goes in
/// the row buffer. Every position is fixed by the record, so the columns
/// are checked and copied independently of one another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlainColumn {
    /// Offset of the attribute header in the answer.
    pub at: u32,
    /// The header: `u16 column id` and `u16 length`, read as one
    /// little-endian `u32`.
    pub header: u32,
    /// Offset of the value in the row buffer.
    pub offset: u32,
    /// The value's size.
    pub size: u32,
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
    /// The size of the plain answer, when every column has a plain form
    /// (fixed size, no range to check).
    pub plain_answer_bytes: Option<usize>,
    /// The plain answer's columns, in record order (empty when it has
    /// none).
    plain_columns: Box<[PlainColumn]>,
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
        let mut plain_columns = Vec::with_capacity(columns.len());
        for (position, &col) in columns.iter().enumerate() {
            let ty = def.columns[col as usize].ty;
            let fixed_size = ty.fixed_size();
            // Types with a range (DATETIME, DATE, ...) go through
            // `validate_bytes`.
            let plain_size = fixed_size.filter(|&n| n < NULL_LEN as usize && !ty.has_range());
            plain_answer_bytes = match (plain_answer_bytes, plain_size) {
                (Some(at), Some(n)) => {
                    plain_columns.push(PlainColumn {
                        at: at as u32,
                        header: u32::from(col) | (n as u32) << 16,
                        offset: offset as u32,
                        size: n as u32,
                    });
                    Some(at + 4 + n)
                }
                _ => None,
            };
            slots.push(Slot {
                col,
                position: position as u16,
                offset,
                fixed_size,
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
        // Every position is below the plain answer's length: if that fits
        // in u32 so do they (else the casts above may have cut them, and
        // the columns are dropped here).
        let plain_answer_bytes = plain_answer_bytes
            .filter(|&n| columns.len() <= u16::MAX as usize && u32::try_from(n).is_ok());
        if plain_answer_bytes.is_none() {
            plain_columns.clear();
        }
        RecordLayout {
            slots,
            by_column,
            fixed_end: offset,
            row_bytes_max: offset + var_bytes_max,
            plain_answer_bytes,
            plain_columns: plain_columns.into(),
        }
    }

    /// The plain answer's columns, in record order; empty when the record
    /// has no plain answer.
    #[inline]
    pub fn plain_columns(&self) -> &[PlainColumn] {
        &self.plain_columns
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

    #[test]
    fn a_plain_answer_has_each_column_at_a_fixed_place() {
        let t = table();
        // k1 BIGINT UNSIGNED, req SMALLINT, a INT: all plain.
        let l = RecordLayout::new(t.def(), &[3, 5, 0]);
        let header = |col: u32, n: u32| col | n << 16;
        assert_eq!(
            l.plain_columns(),
            &[
                PlainColumn {
                    at: 2,
                    header: header(3, 8),
                    offset: 1,
                    size: 8
                },
                PlainColumn {
                    at: 14,
                    header: header(5, 2),
                    offset: 9,
                    size: 2
                },
                PlainColumn {
                    at: 20,
                    header: header(0, 4),
                    offset: 11,
                    size: 4
                },
            ]
        );
        assert_eq!(l.plain_answer_bytes, Some(28));
        // A VARCHAR anywhere: no plain answer.
        let l = RecordLayout::new(t.def(), &[3, 2]);
        assert_eq!((l.plain_answer_bytes, l.plain_columns().len()), (None, 0));
    }
}
