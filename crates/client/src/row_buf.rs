//! [`RowBuf`]: a row laid out by a [`Record`], like the row memory NDB's
//! NdbRecord reads into. The answer to a read is parsed and checked once,
//! when it arrives, and copied into the buffer at offsets the record fixed
//! in advance (`record_layout`); every accessor after that is O(1) and
//! allocates nothing (except [`RowBuf::get_idx`] for strings and bytes).
//!
//! A buffer keeps its allocation when refilled, so a caller that reads
//! many rows hands the same few buffers to transaction after transaction
//! ([`Transaction::read_into`](crate::Transaction::read_into) and
//! [`Transaction::take_row`](crate::Transaction::take_row)).
//!
//! Invariants: a buffer is either empty or filled from one well-formed
//! answer for its record (every record column present once, column ids
//! and value sizes checked with `shoal_types`' validators); a failed fill
//! leaves it empty, never half-filled. It never holds more than the
//! record's largest row.

use crate::attr_reader::AttrReader;
use crate::column_access::{all_column_accessors, Column};
use crate::record::{Record, Table};
use crate::record_layout::{RecordLayout, VAR_ENTRY_BYTES};
use shoal_types::value::validate_bytes;
use shoal_types::{ErrorCode, ShoalError, Value};
use std::fmt;

/// A reusable row buffer, filled by a read through a [`Record`]. Columns
/// are named by their id in the table (`Table::column` turns a name into
/// one, once); typed accessors (`get_u32`, `get_str`, …) read a column
/// without building a [`Value`].
#[derive(Clone, Default)]
pub struct RowBuf {
    /// The record of the last fill, kept while empty so that refilling
    /// through the same record does not touch its reference counts.
    record: Option<Record>,
    filled: bool,
    /// `[null bitmap][fixed slots][variable bytes]` (`record_layout`).
    data: Vec<u8>,
}

impl fmt::Debug for RowBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.filled_record() {
            Some(r) => f
                .debug_struct("RowBuf")
                .field("table", &r.table().name())
                .field("values", &self.values())
                .finish(),
            None => f.write_str("RowBuf(empty)"),
        }
    }
}

impl RowBuf {
    /// An empty buffer; it allocates at its first fill and keeps that
    /// memory afterwards.
    pub fn new() -> RowBuf {
        RowBuf::default()
    }

    /// Parses a read's answer (an attribute list, `shoal_types::layout`)
    /// for `record` into this buffer, replacing what it held. The answer
    /// must hold every column of the record exactly once, in any order,
    /// and nothing else. Errors (`ProtocolViolation`): a truncated list,
    /// trailing bytes, an unknown or repeated column id, a column the
    /// record lacks, a value of the wrong size or out of range; the
    /// buffer is then empty.
    pub fn fill(&mut self, record: &Record, answer: &[u8]) -> Result<(), ShoalError> {
        self.fill_checked(record, answer, true)
            .map(|_| ())
            .map_err(|what| bad_answer(record, what))
    }

    /// Fills the buffer like [`RowBuf::fill`] from the attribute list at
    /// the front of `answers` (one of several back to back, as a scan's
    /// round brings them), and returns the bytes it took. Every list is
    /// parsed once: its end is where its last attribute ends. On error
    /// (what was wrong, for the caller to place) the buffer is empty.
    pub(crate) fn fill_front(&mut self, record: &Record, answers: &[u8]) -> Result<usize, String> {
        self.fill_checked(record, answers, false)
    }

    /// Fills from the front of `answer`; with `whole`, bytes after the
    /// list are an error.
    fn fill_checked(
        &mut self,
        record: &Record,
        answer: &[u8],
        whole: bool,
    ) -> Result<usize, String> {
        if !self.keeps_record(record) {
            self.record = Some(record.clone());
        }
        self.fill_kept(answer, whole)
    }

    /// [`RowBuf::fill_checked`] through the record the buffer keeps.
    fn fill_kept(&mut self, answer: &[u8], whole: bool) -> Result<usize, String> {
        self.filled = false;
        let Some(record) = &self.record else {
            return Err("the row buffer has no record to lay the answer out by".into());
        };
        let result = fill_layout(&mut self.data, record, answer).and_then(|used| {
            match answer.len() - used {
                trailing if whole && trailing > 0 => {
                    Err(format!("{trailing} bytes after the attribute list"))
                }
                _ => Ok(used),
            }
        });
        match &result {
            Ok(_) => self.filled = true,
            Err(_) => self.data.clear(),
        }
        result
    }

    /// Fills the buffer like [`RowBuf::fill`], through the record of its
    /// last fill ([`RowBuf::keeps_record`]).
    pub(crate) fn fill_as_before(&mut self, answer: &[u8]) -> Result<(), ShoalError> {
        match self.fill_kept(answer, true) {
            Ok(_) => Ok(()),
            Err(what) => Err(match &self.record {
                Some(record) => bad_answer(record, what),
                None => ShoalError::with_detail(ErrorCode::Internal, what),
            }),
        }
    }

    /// True if the buffer's last fill was through `record` (it keeps that
    /// record while cleared, so refilling through it clones nothing).
    pub(crate) fn keeps_record(&self, record: &Record) -> bool {
        self.record.as_ref().is_some_and(|r| r.same_as(record))
    }

    /// The record of the buffer's last fill, filled now or not.
    pub(crate) fn kept_record(&self) -> Option<&Record> {
        self.record.as_ref()
    }

    /// Empties the buffer, keeping its memory.
    pub fn clear(&mut self) {
        self.filled = false;
        self.data.clear();
    }

    /// The filled buffer's bytes, laid out by its record as NDB's
    /// NdbRecord lays out a row (`record_layout`: null bitmap, then each
    /// column's slot at [`Record::offset_of`]); empty when not filled.
    /// Comparing a span of them with expected bytes checks several
    /// columns at once.
    pub fn as_bytes(&self) -> &[u8] {
        if self.filled {
            &self.data
        } else {
            &[]
        }
    }

    /// True once a fill succeeded (and until the next fill or clear).
    pub fn is_filled(&self) -> bool {
        self.filled
    }

    /// The record the buffer was filled through, if it is filled.
    pub fn record(&self) -> Option<&Record> {
        self.filled_record()
    }

    /// The table of the row, if the buffer is filled.
    pub fn table(&self) -> Option<&Table> {
        self.filled_record().map(Record::table)
    }

    /// Number of columns held (the record's; 0 when empty).
    pub fn len(&self) -> usize {
        self.filled_record().map_or(0, |r| r.columns().len())
    }

    /// True when the buffer holds no column.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of the column called `name` (see [`RowBuf::get_idx`]).
    pub fn get(&self, name: &str) -> Option<Value> {
        self.get_idx(self.table()?.column(name)?)
    }

    /// Every column as `(column id, value)`, in record order.
    pub fn values(&self) -> Vec<(u16, Value)> {
        let Some(record) = self.filled_record() else {
            return Vec::new();
        };
        record
            .columns()
            .iter()
            .filter_map(|&c| Some((c, self.get_idx(c)?)))
            .collect()
    }

    all_column_accessors!();

    fn filled_record(&self) -> Option<&Record> {
        self.record.as_ref().filter(|_| self.filled)
    }

    fn table_name(&self) -> &str {
        self.table()
            .map_or("(none: the row buffer is empty)", Table::name)
    }

    /// Column `col`, in O(1): its slot comes from the record's layout.
    #[inline]
    fn column(&self, col: u16) -> Option<Column<'_>> {
        let bytes = self.column_bytes(col)?;
        let def = self
            .record
            .as_ref()?
            .table()
            .def()
            .columns
            .get(col as usize)?;
        Some(Column { def, bytes })
    }

    /// The bytes of column `col` (`Some(None)`: NULL), if the row holds it.
    #[inline]
    fn column_bytes(&self, col: u16) -> Option<Option<&[u8]>> {
        let slot = self.filled_record()?.layout().slot_of(col)?;
        let p = slot.position as usize;
        let null = self.data.get(p / 8)? & (1 << (p % 8)) != 0;
        if null {
            return Some(None);
        }
        let bytes = match slot.fixed_size {
            Some(n) => self.data.get(slot.offset..slot.offset + n)?,
            None => {
                let start = read_u32(&self.data, slot.offset)? as usize;
                let len = read_u32(&self.data, slot.offset + 4)? as usize;
                self.data.get(start..start.checked_add(len)?)?
            }
        };
        Some(Some(bytes))
    }
}

/// A read's answer that does not fit its record.
fn bad_answer(record: &Record, what: String) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::ProtocolViolation,
        format!("read result for table {:?}: {what}", record.table().name()),
    )
}

/// Lays the attribute list at the front of `answer` out in `data` by
/// `record`'s layout and returns the list's length (what follows it is the
/// caller's to judge); on error `data` is left for the caller to clear.
fn fill_layout(data: &mut Vec<u8>, record: &Record, answer: &[u8]) -> Result<usize, String> {
    let layout: &RecordLayout = record.layout();
    // A plain list has exactly the plain length: its headers fix it.
    if let Some(front) = layout.plain_answer_bytes.and_then(|n| answer.get(..n)) {
        if fill_plain(data, layout, front) {
            return Ok(front.len());
        }
    }
    let columns = &record.table().def().columns;
    let mut reader = AttrReader::new(answer)?;
    if reader.left() as usize != layout.len() {
        return Err(format!(
            "{} columns for a record of {}",
            reader.left(),
            layout.len()
        ));
    }
    data.clear();
    data.resize(layout.fixed_end, 0);
    // Answers come in record order (the order asked); any other order is
    // accepted too, at the cost of tracking which columns were seen.
    let mut seen: Option<Vec<bool>> = None;
    let mut i = 0usize;
    while let Some(attr) = reader.next_attr()? {
        let in_order = seen.is_none() && layout.slot_at(i).is_some_and(|s| s.col == attr.col);
        let slot = if in_order {
            layout.slot_at(i)
        } else {
            layout.slot_of(attr.col)
        };
        let slot = *slot.ok_or_else(|| {
            if (attr.col as usize) < columns.len() {
                format!("column id {} was not asked for", attr.col)
            } else {
                format!("unknown column id {}", attr.col)
            }
        })?;
        if !in_order {
            let seen = seen.get_or_insert_with(|| {
                let mut s = vec![false; layout.len()];
                s[..i].fill(true);
                s
            });
            let p = slot.position as usize;
            if seen[p] {
                return Err(format!("column id {} twice", attr.col));
            }
            seen[p] = true;
        }
        i += 1;
        let def = &columns[slot.col as usize];
        let Some(value) = attr.value else {
            let p = slot.position as usize;
            data[p / 8] |= 1 << (p % 8);
            continue;
        };
        // A fixed-size value of the right size is valid unless its type
        // has a range (DATETIME, DATE, TIME, DECIMAL): the common case is
        // checked inline.
        let sized = slot.fixed_size == Some(value.len());
        if !sized || def.ty.has_range() {
            validate_bytes(def, value).map_err(|e| e.detail)?;
        }
        match slot.fixed_size {
            Some(n) => data[slot.offset..slot.offset + n].copy_from_slice(value),
            None => {
                let start = u32::try_from(data.len()).map_err(|_| "row too large".to_string())?;
                data.extend_from_slice(value);
                let entry = &mut data[slot.offset..slot.offset + VAR_ENTRY_BYTES];
                entry[..4].copy_from_slice(&start.to_le_bytes());
                entry[4..].copy_from_slice(&(value.len() as u32).to_le_bytes());
            }
        }
    }
    // Every value was checked against its column's size, so this holds
    // for any answer; a failure is a bug in the layout.
    assert!(data.len() <= layout.row_bytes_max);
    Ok(answer.len() - reader.trailing())
}

/// Lays out a plain answer (`record_layout`): every column in record
/// order, none NULL, each fixed-size with no range to check, which is what
/// nearly every read of such a record gets. Any other answer returns
/// false, perhaps with part of `data` written; the general path then
/// parses it and says what, if anything, is wrong with it. A plain answer
/// passes every check the general path makes: its length is exact, and
/// each header names the expected column with the column's size.
#[inline]
fn fill_plain(data: &mut Vec<u8>, layout: &RecordLayout, answer: &[u8]) -> bool {
    if layout.plain_answer_bytes != Some(answer.len()) {
        return false;
    }
    let Some(count) = answer.first_chunk::<2>() else {
        return false;
    };
    if usize::from(u16::from_le_bytes(*count)) != layout.len() {
        return false;
    }
    data.clear();
    data.resize(layout.fixed_end, 0);
    // Positions are fixed by the record and the length is exact, so each
    // column is checked and copied on its own (no chain of positions).
    for c in layout.plain_columns() {
        let (at, n, to) = (c.at as usize, c.size as usize, c.offset as usize);
        let (Some(head), Some(value)) = (answer.get(at..at + 4), answer.get(at + 4..at + 4 + n))
        else {
            return false;
        };
        if u32::from_le_bytes([head[0], head[1], head[2], head[3]]) != c.header {
            return false;
        }
        let Some(to) = data.get_mut(to..to + n) else {
            return false;
        };
        // The common widths as one load and store, not a `memcpy` call.
        match n {
            4 => to[..4].copy_from_slice(&value[..4]),
            8 => to[..8].copy_from_slice(&value[..8]),
            _ => to.copy_from_slice(value),
        }
    }
    true
}

#[inline]
fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::{attr_list as attrs, table};
    use shoal_types::ColumnType;

    #[test]
    fn fills_by_layout_and_reads_typed() {
        let t = table();
        let rec = t.record(&["k1", "name", "k2", "req", "a"]).unwrap();
        let answer = attrs(&[
            (3, Some(&7u64.to_le_bytes())),
            (2, None),
            (1, Some(b"key")),
            (5, Some(&(-2i16).to_le_bytes())),
            (0, Some(&(-9i32).to_le_bytes())),
        ]);
        let mut row = RowBuf::new();
        assert!(!row.is_filled() && row.is_empty());
        row.fill(&rec, &answer).unwrap();
        assert_eq!(row.len(), 5);
        assert_eq!(row.get_u64(3).unwrap(), Some(7));
        assert_eq!(row.get_str(1).unwrap(), Some("key"));
        assert_eq!(row.get_bytes(1).unwrap(), Some(&b"key"[..]));
        assert_eq!(row.get_i16(5).unwrap(), Some(-2));
        assert_eq!(row.get_i32(0).unwrap(), Some(-9));
        assert!(row.is_null(2).unwrap());
        assert_eq!(row.get_str(2).unwrap(), None);
        assert_eq!(row.get("name"), Some(Value::Null));
        assert_eq!(row.get("k2"), Some(Value::Str("key".into())));
        assert_eq!(row.get_raw(0).unwrap(), Some(&(-9i32).to_le_bytes()[..]));
        // The same through the buffer's bytes, at the record's offsets.
        let bytes = row.as_bytes();
        let at = rec.offset_of(3).unwrap();
        assert_eq!(bytes[at..at + 8], 7u64.to_le_bytes());
        let at = rec.offset_of(0).unwrap();
        assert_eq!(bytes[at..at + 4], (-9i32).to_le_bytes());
        let null = |col| {
            let bit = rec.null_bit_of(col).unwrap();
            bytes[bit / 8] & (1 << (bit % 8)) != 0
        };
        assert!(null(2) && !null(3) && !null(1));
        assert_eq!(rec.offset_of(4), None, "not in the record");
        // Wrong types and absent columns are errors, not panics.
        assert_eq!(row.get_u64(0).unwrap_err().code, ErrorCode::BadRequest);
        assert_eq!(row.get_u32(0).unwrap_err().code, ErrorCode::BadRequest);
        assert_eq!(row.get_str(3).unwrap_err().code, ErrorCode::BadRequest);
        assert_eq!(row.get_i32(4).unwrap_err().code, ErrorCode::NoSuchColumn);
        assert_eq!(row.get_i32(99).unwrap_err().code, ErrorCode::NoSuchColumn);
        assert_eq!(row.get("n"), None, "not in the record");
        assert_eq!(
            row.values(),
            vec![
                (3, Value::UInt(7)),
                (2, Value::Null),
                (1, Value::Str("key".into())),
                (5, Value::Int(-2)),
                (0, Value::Int(-9)),
            ]
        );
    }

    #[test]
    fn refills_in_place_and_accepts_any_order() {
        let t = table();
        let rec = t.record(&["k2", "name"]).unwrap();
        let mut row = RowBuf::new();
        row.fill(&rec, &attrs(&[(1, Some(b"longer")), (2, Some(b"ab"))]))
            .unwrap();
        // Refill through the same record, answer in the other order.
        row.fill(&rec, &attrs(&[(2, None), (1, Some(b"k"))]))
            .unwrap();
        assert_eq!(row.get_str(1).unwrap(), Some("k"));
        assert!(row.is_null(2).unwrap());
        // Refill through another record of the table.
        let other = t.record(&["req"]).unwrap();
        row.fill(&other, &attrs(&[(5, Some(&3i16.to_le_bytes()))]))
            .unwrap();
        assert_eq!(row.get_i16(5).unwrap(), Some(3));
        assert_eq!(row.get_str(1).unwrap_err().code, ErrorCode::NoSuchColumn);
    }

    /// `f(k INT UNSIGNED, a INT NULL, b BIGINT, c SMALLINT, d DATETIME)`:
    /// every column fixed-size, `d` with a range to check.
    fn fixed_table() -> Table {
        let def = shoal_types::TableDef::new(
            "f",
            vec![
                shoal_types::ColumnDef::new("k", ColumnType::Int { unsigned: true }),
                shoal_types::ColumnDef::new("a", ColumnType::Int { unsigned: false }).nullable(),
                shoal_types::ColumnDef::new("b", ColumnType::BigInt { unsigned: false }),
                shoal_types::ColumnDef::new("c", ColumnType::SmallInt { unsigned: false }),
                shoal_types::ColumnDef::new("d", ColumnType::DateTime),
            ],
            &["k"],
        )
        .unwrap();
        Table::new(def)
    }

    #[test]
    fn plain_answers_take_the_short_path_and_others_the_checked_one() {
        let t = fixed_table();
        let rec = t.record(&["k", "b", "a", "c"]).unwrap();
        assert_eq!(
            rec.layout().plain_answer_bytes,
            Some(2 + 4 * 4 + 4 + 8 + 4 + 2)
        );
        let b = (-5i64).to_le_bytes();
        let plain = attrs(&[
            (0, Some(&7u32.to_le_bytes())),
            (2, Some(&b)),
            (1, Some(&(-3i32).to_le_bytes())),
            (3, Some(&9i16.to_le_bytes())),
        ]);
        let mut row = RowBuf::new();
        assert!(fill_plain(&mut row.data, rec.layout(), &plain));
        row.fill(&rec, &plain).unwrap();
        assert_eq!(row.get_u32(0).unwrap(), Some(7));
        assert_eq!(row.get_i64(2).unwrap(), Some(-5));
        assert_eq!(row.get_i32(1).unwrap(), Some(-3));
        assert_eq!(row.get_i16(3).unwrap(), Some(9));
        assert_eq!(row.get_raw(2).unwrap(), Some(&b[..]));
        assert_eq!(row.get_raw(4).unwrap_err().code, ErrorCode::NoSuchColumn);
        // NULL, or another order: the general path, same result.
        for answer in [
            attrs(&[
                (0, Some(&7u32.to_le_bytes())),
                (2, Some(&b)),
                (1, None),
                (3, Some(&9i16.to_le_bytes())),
            ]),
            attrs(&[
                (3, Some(&9i16.to_le_bytes())),
                (0, Some(&7u32.to_le_bytes())),
                (1, None),
                (2, Some(&b)),
            ]),
        ] {
            assert!(!fill_plain(&mut Vec::new(), rec.layout(), &answer));
            row.fill(&rec, &answer).unwrap();
            assert_eq!(row.get_i32(1).unwrap(), None);
            assert_eq!(row.get_i64(2).unwrap(), Some(-5));
            assert_eq!(row.get_i16(3).unwrap(), Some(9));
        }
        // Answers of exactly the plain length that are not plain are
        // refused as before.
        let mut wrong_col = plain.clone();
        wrong_col[2..4].copy_from_slice(&4u16.to_le_bytes()); // d: not asked for
        let mut wrong_sizes = plain.clone();
        let k_len = 4; // k's length field
        wrong_sizes[k_len..k_len + 2].copy_from_slice(&3u16.to_le_bytes());
        let mut wrong_count = plain.clone();
        wrong_count[..2].copy_from_slice(&3u16.to_le_bytes());
        for bad in [wrong_col, wrong_sizes, wrong_count] {
            assert_eq!(bad.len(), plain.len());
            row.fill(&rec, &plain).unwrap();
            let err = row.fill(&rec, &bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::ProtocolViolation, "{bad:?}");
            assert!(!row.is_filled());
        }
        // DATETIME has a range to check: no plain form.
        assert_eq!(
            t.record(&["k", "d"]).unwrap().layout().plain_answer_bytes,
            None
        );
        assert_eq!(
            t.record(&["k"]).unwrap().layout().plain_answer_bytes,
            Some(2 + 4 + 4)
        );
    }

    #[test]
    fn refuses_malformed_answers_and_stays_empty() {
        let t = table();
        let rec = t.record(&["k1", "k2"]).unwrap();
        let k1 = 1u64.to_le_bytes();
        let good = attrs(&[(3, Some(&k1)), (1, Some(b"x"))]);
        let mut extra = good.clone();
        extra.push(0);
        let bad = [
            attrs(&[(3, Some(&k1[..3])), (1, Some(b"x"))]), // BIGINT needs 8 bytes
            attrs(&[(3, Some(&k1)), (1, Some(&[b'x'; 9]))]), // VARCHAR(8)
            attrs(&[(3, Some(&k1)), (42, None)]),           // no such column
            attrs(&[(3, Some(&k1)), (0, None)]),            // not asked for
            attrs(&[(3, Some(&k1)), (3, Some(&k1))]),       // twice
            attrs(&[(3, Some(&k1))]),                       // one missing
            good[..good.len() - 1].to_vec(),                // truncated
            vec![],
            extra,
        ];
        let mut row = RowBuf::new();
        for answer in bad {
            row.fill(&rec, &good).unwrap();
            let err = row.fill(&rec, &answer).unwrap_err();
            assert_eq!(err.code, ErrorCode::ProtocolViolation, "{answer:?}");
            assert!(!row.is_filled() && row.get_idx(3).is_none());
            assert_eq!(row.get_u64(3).unwrap_err().code, ErrorCode::NoSuchColumn);
        }
    }
}
