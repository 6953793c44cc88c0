//! Attribute lists (how column values travel) and the stored-row layout
//! (how a data node keeps a row: a fixed part and an optional variable part).
//!
//! **Attribute list** — `u16 count`, then per attribute `u16 column id`,
//! `u16 length` (`0xFFFF` = NULL) and that many canonical value bytes
//! (see [`crate::value`]).
//!
//! **Primary key** — the key columns in key order; a fixed-size column as
//! its canonical bytes, a variable-size one as `u16 length` + bytes. Equal
//! keys have equal bytes, so the key bytes are hashed and compared directly.
//!
//! **Fixed part** — `[fixed key columns][null bitmap][other fixed columns]
//! [u32 var-part handle, if the table has variable columns]`. Putting the
//! fixed key columns first means that, when every key column is fixed, the
//! key equals the first bytes of the fixed part and the hash index compares
//! keys with one `memcmp`.
//!
//! **Variable part** — every VARCHAR/VARBINARY column in column order, each
//! as `u16 length` (`0xFFFF` = NULL) + bytes.

use crate::error::{ErrorCode, ShoalError};
use crate::schema::{ColumnDef, TableDef, COLUMNS_MAX};
use crate::value::{encode_value, validate_bytes, Value};

/// Length marker of a NULL attribute.
pub const NULL_LEN: u16 = 0xFFFF;

fn bad_request(detail: impl Into<String>) -> ShoalError {
    ShoalError::with_detail(ErrorCode::BadRequest, detail)
}

/// Appends one attribute to an attribute list under construction.
#[inline]
pub fn push_attr(out: &mut Vec<u8>, col: u16, val: Option<&[u8]>) {
    out.extend_from_slice(&col.to_le_bytes());
    match val {
        None => out.extend_from_slice(&NULL_LEN.to_le_bytes()),
        Some(b) => {
            debug_assert!(b.len() < NULL_LEN as usize);
            out.extend_from_slice(&(b.len() as u16).to_le_bytes());
            out.extend_from_slice(b);
        }
    }
}

/// [`push_attr`] of a non-NULL value, with the common widths written as
/// whole words: a 4-byte value and its header are one 8-byte store, not
/// three appends and a `memcpy` call.
#[inline]
fn push_value(out: &mut Vec<u8>, col: u16, val: &[u8]) {
    debug_assert!(val.len() < NULL_LEN as usize);
    let head = u32::from(col) | (val.len() as u32) << 16;
    if let Ok(word) = <[u8; 4]>::try_from(val) {
        let both = u64::from(head) | u64::from(u32::from_le_bytes(word)) << 32;
        out.extend_from_slice(&both.to_le_bytes());
    } else if let Ok(word) = <[u8; 8]>::try_from(val) {
        out.extend_from_slice(&head.to_le_bytes());
        out.extend_from_slice(&word);
    } else {
        out.extend_from_slice(&head.to_le_bytes());
        out.extend_from_slice(val);
    }
}

/// Builds an attribute list in place: reserves the count, then patches it.
pub struct AttrListWriter {
    count_at: usize,
    count: u16,
}

impl AttrListWriter {
    pub fn begin(out: &mut Vec<u8>) -> Self {
        let count_at = out.len();
        out.extend_from_slice(&0u16.to_le_bytes());
        AttrListWriter { count_at, count: 0 }
    }

    #[inline]
    pub fn push(&mut self, out: &mut Vec<u8>, col: u16, val: Option<&[u8]>) {
        push_attr(out, col, val);
        self.count += 1;
    }

    pub fn finish(self, out: &mut [u8]) {
        out[self.count_at..self.count_at + 2].copy_from_slice(&self.count.to_le_bytes());
    }
}

/// A structurally valid attribute list borrowed from a buffer.
#[derive(Clone, Copy, Debug)]
pub struct AttrSlice<'a> {
    body: &'a [u8],
    count: u16,
}

impl<'a> AttrSlice<'a> {
    pub const EMPTY: AttrSlice<'static> = AttrSlice {
        body: &[],
        count: 0,
    };

    /// Parses an attribute list from the front of `buf`, checking every
    /// length, and returns it with the bytes that follow it.
    pub fn parse(buf: &'a [u8]) -> Result<(AttrSlice<'a>, &'a [u8]), ShoalError> {
        if buf.len() < 2 {
            return Err(bad_request("attribute list truncated"));
        }
        let count = u16::from_le_bytes([buf[0], buf[1]]);
        let mut pos = 2usize;
        for _ in 0..count {
            if buf.len() < pos + 4 {
                return Err(bad_request("attribute header truncated"));
            }
            let len = u16::from_le_bytes([buf[pos + 2], buf[pos + 3]]);
            pos += 4;
            if len != NULL_LEN {
                if buf.len() < pos + len as usize {
                    return Err(bad_request("attribute value truncated"));
                }
                pos += len as usize;
            }
        }
        Ok((
            AttrSlice {
                body: &buf[2..pos],
                count,
            },
            &buf[pos..],
        ))
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size including the count.
    pub fn encoded_len(&self) -> usize {
        2 + self.body.len()
    }

    /// Appends the encoded list (count included) to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(self.body);
    }

    pub fn iter(&self) -> AttrIter<'a> {
        AttrIter { rest: self.body }
    }
}

/// Iterates `(column id, value bytes or None for NULL)`.
pub struct AttrIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for AttrIter<'a> {
    type Item = (u16, Option<&'a [u8]>);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let col = u16::from_le_bytes([self.rest[0], self.rest[1]]);
        let len = u16::from_le_bytes([self.rest[2], self.rest[3]]);
        if len == NULL_LEN {
            self.rest = &self.rest[4..];
            Some((col, None))
        } else {
            let (v, rest) = self.rest[4..].split_at(len as usize);
            self.rest = rest;
            Some((col, Some(v)))
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Slot {
    Fixed { offset: usize, len: usize },
    Var { index: usize },
}

/// A column as the read path sees it ([`RowLayout::read_attrs`]).
#[derive(Clone, Copy, Debug)]
struct ReadSlot {
    /// A fixed column's offset in the fixed part; a var column's index
    /// among the var values.
    at: u32,
    /// A fixed column's length; [`READ_VAR`] for a var column.
    len: u16,
    /// A fixed column's bit in the null bitmap; [`NOT_NULLABLE`] if it
    /// has none. A var column has a bit too, but its NULL is also in its
    /// var part, which is what the read path looks at.
    null_bit: u16,
}

const READ_VAR: u16 = u16::MAX;
const NOT_NULLABLE: u16 = u16::MAX;

impl ReadSlot {
    fn new(slot: &Slot, null_bit: Option<usize>) -> ReadSlot {
        match *slot {
            Slot::Fixed { offset, len } => ReadSlot {
                at: u32::try_from(offset).expect("a row is far below 4 GiB"),
                len: u16::try_from(len)
                    .ok()
                    .filter(|&l| l != READ_VAR)
                    .expect("a fixed column is below 64 KiB"),
                null_bit: null_bit.map_or(NOT_NULLABLE, |b| {
                    u16::try_from(b).expect("at most COLUMNS_MAX columns")
                }),
            },
            Slot::Var { index } => ReadSlot {
                at: u32::try_from(index).expect("at most COLUMNS_MAX columns"),
                len: READ_VAR,
                null_bit: NOT_NULLABLE,
            },
        }
    }
}

/// A read of every column of a row without var columns or NULLs: its
/// answer has the same shape for every row (each header fixed, each
/// value at a fixed place), so it is a copy of `answer` with the values
/// copied in, not an attribute list built column by column.
#[derive(Clone)]
struct AllColumns {
    /// The answer's bytes, headers in place, values zero.
    answer: Vec<u8>,
    /// Each value: where it is in the fixed part, where in the answer.
    moves: Vec<ValueMove>,
    /// Bytes of the row's null bitmap: the template holds only while all
    /// of them are zero.
    null_bytes: usize,
}

#[derive(Clone, Copy, Debug)]
struct ValueMove {
    from: u32,
    to: u32,
    len: u32,
}

impl std::fmt::Debug for AllColumns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllColumns")
            .field("answer_bytes", &self.answer.len())
            .field("columns", &self.moves.len())
            .finish()
    }
}

impl AllColumns {
    /// Templates are kept for answers up to this size: a wider row's
    /// answer is mostly its values' bytes, so a template would save
    /// little and hold much memory per table.
    const ANSWER_MAX: usize = 4096;

    /// `None` when the answer would be over [`Self::ANSWER_MAX`].
    fn new(slots: &[Slot], null_bytes: usize) -> Option<AllColumns> {
        let size = slots.iter().fold(2, |n, slot| match slot {
            Slot::Fixed { len, .. } => n + 4 + len,
            Slot::Var { .. } => n + 4,
        });
        if size > Self::ANSWER_MAX {
            return None;
        }
        let mut answer = Vec::with_capacity(size);
        let mut w = AttrListWriter::begin(&mut answer);
        let mut moves = Vec::with_capacity(slots.len());
        for (col, slot) in slots.iter().enumerate() {
            let Slot::Fixed { offset, len } = *slot else {
                unreachable!("a table with var columns has no all-columns template");
            };
            let to = answer.len() + 4;
            w.count += 1;
            answer.extend_from_slice(&(col as u16).to_le_bytes());
            answer.extend_from_slice(&(len as u16).to_le_bytes());
            answer.resize(to + len, 0);
            let word = |n: usize| u32::try_from(n).expect("a row is far below 4 GiB");
            moves.push(ValueMove {
                from: word(offset),
                to: word(to),
                len: word(len),
            });
        }
        w.finish(&mut answer);
        debug_assert_eq!(answer.len(), size);
        Some(AllColumns {
            answer,
            moves,
            null_bytes,
        })
    }

    /// Appends the answer for a row's fixed part (no NULLs in it).
    fn read(&self, fixed: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.answer);
        let answer = &mut out[start..];
        for m in &self.moves {
            let (from, to) = (m.from as usize, m.to as usize);
            // Lengths the compiler sees as constants: one load and one
            // store each, not a `memcpy` call.
            match m.len {
                4 => answer[to..to + 4].copy_from_slice(&fixed[from..from + 4]),
                8 => answer[to..to + 8].copy_from_slice(&fixed[from..from + 8]),
                len => {
                    let len = len as usize;
                    answer[to..to + len].copy_from_slice(&fixed[from..from + len])
                }
            }
        }
    }
}

/// A row's two parts as a data node builds them, kept between rows so
/// their allocations are reused.
#[derive(Default, Debug)]
pub struct RowBuf {
    pub fixed: Vec<u8>,
    pub var: Vec<u8>,
}

/// Var columns whose values a row being built keeps on the stack.
const VAR_INLINE: usize = 32;

/// A set of column ids (below [`COLUMNS_MAX`]), on the stack.
#[derive(Default)]
struct ColumnSet([u64; COLUMNS_MAX / 64]);

impl ColumnSet {
    fn insert(&mut self, col: usize) {
        self.0[col / 64] |= 1 << (col % 64);
    }

    fn contains(&self, col: usize) -> bool {
        self.0[col / 64] & (1 << (col % 64)) != 0
    }
}

/// Where each column of one table lives in a stored row, plus the encoded
/// defaults. Built once per (table, version) and shared.
#[derive(Clone, Debug)]
pub struct RowLayout {
    pub table: TableDef,
    slots: Vec<Slot>,
    /// Bit index in the null bitmap, for nullable columns.
    null_bits: Vec<Option<usize>>,
    /// `slots` and `null_bits` again, packed: one 8-byte load per column
    /// read (the read path's whole view of a column).
    read_slots: Vec<ReadSlot>,
    /// The answer to a read of every column, for tables without var
    /// columns; `None` for the others.
    all_columns: Option<AllColumns>,
    null_offset: usize,
    /// Bytes of the fixed part.
    pub fixed_size: usize,
    /// Offset of the u32 var-part handle, when the table has var columns.
    pub var_handle_offset: Option<usize>,
    var_count: usize,
    /// `Some(n)` when every key column is fixed: the key is `fixed[..n]`.
    pub key_prefix_len: Option<usize>,
    /// Encoded default per column (`None`: NULL, or "must be given" if NOT NULL).
    defaults: Vec<Option<Vec<u8>>>,
}

impl RowLayout {
    pub fn new(table: &TableDef) -> RowLayout {
        let n = table.columns.len();
        let mut slots = vec![Slot::Var { index: usize::MAX }; n];
        let mut offset = 0usize;
        let mut all_key_fixed = true;
        for &k in &table.primary_key {
            match table.columns[k as usize].ty.fixed_size() {
                Some(len) => {
                    slots[k as usize] = Slot::Fixed { offset, len };
                    offset += len;
                }
                None => all_key_fixed = false,
            }
        }
        let key_prefix_len = all_key_fixed.then_some(offset);
        let mut null_bits = vec![None; n];
        let mut nullable = 0usize;
        for (i, c) in table.columns.iter().enumerate() {
            if c.nullable {
                null_bits[i] = Some(nullable);
                nullable += 1;
            }
        }
        let null_offset = offset;
        offset += nullable.div_ceil(8);
        let mut var_count = 0usize;
        for (i, c) in table.columns.iter().enumerate() {
            if table.is_key_column(i as u16) && !c.ty.is_var() {
                continue;
            }
            match c.ty.fixed_size() {
                Some(len) => {
                    slots[i] = Slot::Fixed { offset, len };
                    offset += len;
                }
                None => {
                    slots[i] = Slot::Var { index: var_count };
                    var_count += 1;
                }
            }
        }
        let var_handle_offset = (var_count > 0).then(|| {
            let at = offset;
            offset += 4;
            at
        });
        let defaults = table
            .columns
            .iter()
            .map(|c| {
                c.default.as_ref().filter(|d| !d.is_null()).map(|d| {
                    let mut b = Vec::new();
                    encode_value(c, d, &mut b).expect("defaults are validated at create");
                    b
                })
            })
            .collect();
        let read_slots = slots
            .iter()
            .zip(&null_bits)
            .map(|(slot, bit)| ReadSlot::new(slot, *bit))
            .collect();
        let all_columns = if var_count == 0 {
            AllColumns::new(&slots, nullable.div_ceil(8))
        } else {
            None
        };
        RowLayout {
            table: table.clone(),
            slots,
            null_bits,
            read_slots,
            all_columns,
            null_offset,
            fixed_size: offset.max(1),
            var_handle_offset,
            var_count,
            key_prefix_len,
            defaults,
        }
    }

    pub fn columns(&self) -> &[ColumnDef] {
        &self.table.columns
    }

    pub fn has_var_part(&self) -> bool {
        self.var_count > 0
    }

    fn column(&self, col: u16) -> Result<&ColumnDef, ShoalError> {
        self.table.columns.get(col as usize).ok_or_else(|| {
            ShoalError::with_detail(
                ErrorCode::NoSuchColumn,
                format!("table {:?} has no column id {col}", self.table.name),
            )
        })
    }

    /// Checks a column id list for a read: each id a column of the
    /// table, none named twice (so an answer is at most a header per
    /// column plus the row's bytes: a list repeating one wide column
    /// thousands of times would otherwise ask for gigabytes).
    pub fn check_column_ids(&self, cols: impl Iterator<Item = u16>) -> Result<(), ShoalError> {
        let mut seen = ColumnSet::default();
        for c in cols {
            self.column(c)?;
            if seen.contains(c as usize) {
                return Err(bad_request(format!(
                    "column id {c} is named twice in the read's column list"
                )));
            }
            seen.insert(c as usize);
        }
        Ok(())
    }

    /// Encodes key values given in key order (client side).
    pub fn encode_key(&self, values: &[Value], out: &mut Vec<u8>) -> Result<(), ShoalError> {
        if values.len() != self.table.primary_key.len() {
            return Err(ShoalError::with_detail(
                ErrorCode::BadPrimaryKey,
                format!(
                    "table {:?} has {} primary key column(s), got {} value(s)",
                    self.table.name,
                    self.table.primary_key.len(),
                    values.len()
                ),
            ));
        }
        for (&k, v) in self.table.primary_key.iter().zip(values) {
            let col = &self.table.columns[k as usize];
            if v.is_null() {
                return Err(ShoalError::with_detail(
                    ErrorCode::IllegalNull,
                    format!("primary key column {:?} cannot be NULL", col.name),
                ));
            }
            if col.ty.is_var() {
                let at = out.len();
                out.extend_from_slice(&[0, 0]);
                encode_value(col, v, out)?;
                let len = (out.len() - at - 2) as u16;
                out[at..at + 2].copy_from_slice(&len.to_le_bytes());
            } else {
                encode_value(col, v, out)?;
            }
        }
        Ok(())
    }

    /// Splits and validates an encoded key (data-node side), calling `f`
    /// with each key column id and its value bytes.
    pub fn split_key<'k>(
        &self,
        key: &'k [u8],
        mut f: impl FnMut(u16, &'k [u8]),
    ) -> Result<(), ShoalError> {
        let bad = |what: &str| {
            ShoalError::with_detail(
                ErrorCode::BadPrimaryKey,
                format!("table {:?}: {what}", self.table.name),
            )
        };
        if let Some(n) = self.key_prefix_len {
            if key.len() != n {
                return Err(bad(&format!("key must be {n} bytes, got {}", key.len())));
            }
        }
        let mut rest = key;
        for &k in &self.table.primary_key {
            let col = &self.table.columns[k as usize];
            let len = match col.ty.fixed_size() {
                Some(n) => n,
                None => {
                    if rest.len() < 2 {
                        return Err(bad("key truncated"));
                    }
                    let n = u16::from_le_bytes([rest[0], rest[1]]) as usize;
                    rest = &rest[2..];
                    n
                }
            };
            if rest.len() < len {
                return Err(bad("key truncated"));
            }
            let (v, r) = rest.split_at(len);
            validate_bytes(col, v)?;
            f(k, v);
            rest = r;
        }
        if !rest.is_empty() {
            return Err(bad("extra bytes after the key"));
        }
        Ok(())
    }

    fn set_null(&self, fixed: &mut [u8], col: usize, null: bool) {
        if let Some(bit) = self.null_bits[col] {
            let byte = &mut fixed[self.null_offset + bit / 8];
            if null {
                *byte |= 1 << (bit % 8);
            } else {
                *byte &= !(1 << (bit % 8));
            }
        }
    }

    fn is_null(&self, fixed: &[u8], col: usize) -> bool {
        match self.null_bits[col] {
            Some(bit) => fixed[self.null_offset + bit / 8] & (1 << (bit % 8)) != 0,
            None => false,
        }
    }

    fn var_values<'r>(&self, var: &'r [u8]) -> Vec<Option<&'r [u8]>> {
        let mut vals = vec![None; self.var_count];
        self.var_values_into(var, &mut vals);
        vals
    }

    /// The first `vals.len()` var values of a stored var part, in order.
    fn var_values_into<'r>(&self, var: &'r [u8], vals: &mut [Option<&'r [u8]>]) {
        let mut rest = var;
        for val in vals {
            let len = u16::from_le_bytes([rest[0], rest[1]]);
            rest = &rest[2..];
            if len == NULL_LEN {
                *val = None;
            } else {
                let (v, r) = rest.split_at(len as usize);
                *val = Some(v);
                rest = r;
            }
        }
    }

    fn encode_var(vals: &[Option<&[u8]>]) -> Vec<u8> {
        let mut out = Vec::new();
        Self::encode_var_into(vals, &mut out);
        out
    }

    /// Appends the var part of `vals` to `out`.
    fn encode_var_into(vals: &[Option<&[u8]>], out: &mut Vec<u8>) {
        out.reserve(vals.iter().map(|v| 2 + v.map_or(0, <[u8]>::len)).sum());
        for v in vals {
            match v {
                None => out.extend_from_slice(&NULL_LEN.to_le_bytes()),
                Some(b) => {
                    out.extend_from_slice(&(b.len() as u16).to_le_bytes());
                    out.extend_from_slice(b);
                }
            }
        }
    }

    /// Checks one attribute of an insert or update.
    fn check_attr(&self, col: u16, val: Option<&[u8]>) -> Result<&ColumnDef, ShoalError> {
        let c = self.column(col)?;
        if self.table.is_key_column(col) {
            return Err(bad_request(format!(
                "column {:?} is part of the primary key; it is set by the key, not as a value",
                c.name
            )));
        }
        match val {
            None if !c.nullable => Err(ShoalError::with_detail(
                ErrorCode::IllegalNull,
                format!("column {:?} is NOT NULL", c.name),
            )),
            None => Ok(c),
            Some(b) => validate_bytes(c, b).map(|_| c),
        }
    }

    /// Builds a new row from its key and the given attributes; columns not
    /// given take their default. Returns (fixed part, var part).
    pub fn build_row(
        &self,
        key: &[u8],
        attrs: AttrSlice<'_>,
    ) -> Result<(Vec<u8>, Vec<u8>), ShoalError> {
        let mut row = RowBuf::default();
        self.build_row_into(key, attrs, &mut row)?;
        Ok((row.fixed, row.var))
    }

    /// [`RowLayout::build_row`] into `row`'s buffers (their old content
    /// replaced): a data node inserting row after row reuses one
    /// `RowBuf` and allocates nothing per row. On an error `row` holds
    /// nothing of use.
    pub fn build_row_into(
        &self,
        key: &[u8],
        attrs: AttrSlice<'_>,
        row: &mut RowBuf,
    ) -> Result<(), ShoalError> {
        let n = self.table.columns.len();
        debug_assert!(n <= COLUMNS_MAX, "a table has at most COLUMNS_MAX columns");
        let fixed = &mut row.fixed;
        fixed.clear();
        fixed.resize(self.fixed_size, 0);
        // The var values by their index among the var columns, on the
        // stack for the usual narrow table.
        let mut inline_var: [Option<&[u8]>; VAR_INLINE] = [None; VAR_INLINE];
        let mut heap_var: Vec<Option<&[u8]>>;
        let var: &mut [Option<&[u8]>] = if self.var_count <= VAR_INLINE {
            &mut inline_var[..self.var_count]
        } else {
            heap_var = vec![None; self.var_count];
            &mut heap_var
        };
        let mut given = ColumnSet::default();
        self.split_key(key, |k, v| {
            given.insert(k as usize);
            match self.slots[k as usize] {
                Slot::Fixed { offset, len } => fixed[offset..offset + len].copy_from_slice(v),
                Slot::Var { index } => var[index] = Some(v),
            }
        })?;
        for (col, val) in attrs.iter() {
            self.check_attr(col, val)?;
            let i = col as usize;
            if given.contains(i) {
                return Err(bad_request(format!(
                    "column {:?} is given twice",
                    self.table.columns[i].name
                )));
            }
            given.insert(i);
            self.store(fixed, var, i, val);
        }
        for (i, c) in self.table.columns.iter().enumerate().take(n) {
            if given.contains(i) {
                continue;
            }
            match &self.defaults[i] {
                Some(d) => self.store(fixed, var, i, Some(d)),
                None if c.nullable => self.store(fixed, var, i, None),
                None => {
                    return Err(ShoalError::with_detail(
                        ErrorCode::IllegalNull,
                        format!(
                            "column {:?} is NOT NULL and has no default; give a value",
                            c.name
                        ),
                    ))
                }
            }
        }
        row.var.clear();
        Self::encode_var_into(var, &mut row.var);
        Ok(())
    }

    fn store<'v>(
        &self,
        fixed: &mut [u8],
        var: &mut [Option<&'v [u8]>],
        col: usize,
        val: Option<&'v [u8]>,
    ) {
        self.set_null(fixed, col, val.is_none());
        match self.slots[col] {
            Slot::Fixed { offset, len } => match val {
                Some(b) => fixed[offset..offset + len].copy_from_slice(b),
                None => fixed[offset..offset + len].fill(0),
            },
            Slot::Var { index } => var[index] = val,
        }
    }

    /// Applies an update to a stored row. Returns the new fixed part and,
    /// when a variable column changed, the new var part (`None`: unchanged).
    pub fn update_row(
        &self,
        fixed: &[u8],
        var: &[u8],
        attrs: AttrSlice<'_>,
    ) -> Result<(Vec<u8>, Option<Vec<u8>>), ShoalError> {
        let mut new_fixed = fixed.to_vec();
        let mut vars: Option<Vec<Option<&[u8]>>> = None;
        for (col, val) in attrs.iter() {
            self.check_attr(col, val)?;
            let i = col as usize;
            if let Slot::Var { .. } = self.slots[i] {
                if vars.is_none() {
                    vars = Some(self.var_values(var));
                }
            }
            let mut scratch: Vec<Option<&[u8]>> = Vec::new();
            let target = vars.as_mut().unwrap_or(&mut scratch);
            self.store(&mut new_fixed, target, i, val);
        }
        Ok((new_fixed, vars.map(|v| Self::encode_var(&v))))
    }

    /// The bytes of one column of a stored row (`None`: NULL).
    pub fn column_bytes<'r>(&self, fixed: &'r [u8], var: &'r [u8], col: u16) -> Option<&'r [u8]> {
        let i = col as usize;
        match self.slots[i] {
            Slot::Fixed { offset, len } => {
                if self.is_null(fixed, i) {
                    None
                } else {
                    Some(&fixed[offset..offset + len])
                }
            }
            Slot::Var { index } => Self::var_value(var, index),
        }
    }

    /// The `index`th value of a stored var part, found by walking the
    /// lengths before it (no allocation: a scan's filter reads columns
    /// of every row it looks at).
    fn var_value(var: &[u8], index: usize) -> Option<&[u8]> {
        let mut rest = var;
        for _ in 0..index {
            let len = u16::from_le_bytes([rest[0], rest[1]]);
            rest = &rest[2..];
            if len != NULL_LEN {
                rest = &rest[len as usize..];
            }
        }
        let len = u16::from_le_bytes([rest[0], rest[1]]);
        (len != NULL_LEN).then(|| &rest[2..2 + len as usize])
    }

    /// Appends an attribute list of every column of a stored row, in
    /// column order.
    pub fn read_all_attrs(&self, fixed: &[u8], var: &[u8], out: &mut Vec<u8>) {
        if let Some(all) = self.all_columns_template(fixed) {
            return all.read(fixed, out);
        }
        let n = self.table.columns.len();
        self.read_attrs(fixed, var, n, 0..n as u16, out)
    }

    /// The template an all-columns read of this row uses, if any: the
    /// table has one and the row has no NULL.
    fn all_columns_template(&self, fixed: &[u8]) -> Option<&AllColumns> {
        let all = self.all_columns.as_ref()?;
        let nulls = &fixed[self.null_offset..self.null_offset + all.null_bytes];
        nulls.iter().all(|&b| b == 0).then_some(all)
    }

    /// Appends an attribute list of the `count` columns `cols` names of a
    /// stored row, in that order. Column ids must have been checked.
    pub fn read_attrs(
        &self,
        fixed: &[u8],
        var: &[u8],
        count: usize,
        cols: impl Iterator<Item = u16>,
        out: &mut Vec<u8>,
    ) {
        // The answer is at most a header per column plus the row's bytes:
        // one allocation, not a doubling per few columns (small rows; a
        // few columns of a wide row grow as needed).
        let bound = 2 + 4 * count + fixed.len() + var.len();
        if bound <= 4096 {
            out.reserve(bound);
        }
        let mut w = AttrListWriter::begin(out);
        // The var values, found once per row: on the stack for most
        // tables (a read allocates nothing but its answer).
        let mut on_stack = [None; VAR_INLINE];
        let on_heap;
        let vars: &[Option<&[u8]>] = if self.var_count == 0 {
            &[]
        } else if self.var_count <= VAR_INLINE {
            self.var_values_into(var, &mut on_stack[..self.var_count]);
            &on_stack[..self.var_count]
        } else {
            on_heap = self.var_values(var);
            &on_heap
        };
        for col in cols {
            let s = self.read_slots[col as usize];
            if s.len == READ_VAR {
                push_attr(out, col, vars[s.at as usize]);
            } else if s.null_bit != NOT_NULLABLE
                && fixed[self.null_offset + usize::from(s.null_bit / 8)] & (1 << (s.null_bit % 8))
                    != 0
            {
                push_attr(out, col, None);
            } else {
                let at = s.at as usize;
                push_value(out, col, &fixed[at..at + usize::from(s.len)]);
            }
            w.count += 1;
        }
        w.finish(out);
    }

    /// Appends the encoded primary key of a stored row.
    pub fn key_of_row(&self, fixed: &[u8], var: &[u8], out: &mut Vec<u8>) {
        if let Some(n) = self.key_prefix_len {
            out.extend_from_slice(&fixed[..n]);
            return;
        }
        for &k in &self.table.primary_key {
            let v = self
                .column_bytes(fixed, var, k)
                .expect("key columns are NOT NULL");
            if self.table.columns[k as usize].ty.is_var() {
                out.extend_from_slice(&(v.len() as u16).to_le_bytes());
            }
            out.extend_from_slice(v);
        }
    }

    /// Appends the values of `cols` of a stored row encoded as a key of
    /// those columns (a unique index's key, the way [`Self::encode_key`]
    /// encodes a primary key); false, with `out` as it was, if one is NULL
    /// (such a row has no entry). Column ids must exist.
    pub fn columns_key_of_row(
        &self,
        fixed: &[u8],
        var: &[u8],
        cols: &[u16],
        out: &mut Vec<u8>,
    ) -> bool {
        let start = out.len();
        for &c in cols {
            let Some(v) = self.column_bytes(fixed, var, c) else {
                out.truncate(start);
                return false;
            };
            if self.table.columns[c as usize].ty.is_var() {
                out.extend_from_slice(&(v.len() as u16).to_le_bytes());
            }
            out.extend_from_slice(v);
        }
        true
    }

    /// Whether a stored row has this encoded key.
    #[inline]
    pub fn key_matches(&self, fixed: &[u8], var: &[u8], key: &[u8]) -> bool {
        match self.key_prefix_len {
            Some(n) => key.len() == n && &fixed[..n] == key,
            None => {
                let mut buf = Vec::with_capacity(key.len());
                self.key_of_row(fixed, var, &mut buf);
                buf == key
            }
        }
    }
}

/// Encodes `values` (by column id) as an attribute list for an insert or
/// update (client side).
pub fn encode_attrs(
    table: &TableDef,
    values: &[(u16, &Value)],
    out: &mut Vec<u8>,
) -> Result<(), ShoalError> {
    let mut w = AttrListWriter::begin(out);
    let mut scratch = Vec::new();
    for &(col, v) in values {
        let c = table.columns.get(col as usize).ok_or_else(|| {
            ShoalError::with_detail(ErrorCode::NoSuchColumn, format!("no column id {col}"))
        })?;
        if v.is_null() {
            w.push(out, col, None);
        } else {
            scratch.clear();
            encode_value(c, v, &mut scratch)?;
            w.push(out, col, Some(&scratch));
        }
    }
    w.finish(out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ColumnDef, ColumnType};
    use crate::value::decode_value;

    fn table() -> TableDef {
        TableDef::new(
            "t",
            vec![
                ColumnDef::new("a", ColumnType::VarChar(10)).nullable(),
                ColumnDef::new("id", ColumnType::Int { unsigned: false }),
                ColumnDef::new("b", ColumnType::BigInt { unsigned: true }).default_value(7u64),
                ColumnDef::new("c", ColumnType::Char(3)).nullable(),
                ColumnDef::new("k2", ColumnType::VarBinary(4)),
            ],
            &["id", "k2"],
        )
        .unwrap()
    }

    fn attrs(t: &TableDef, vals: &[(u16, Value)]) -> Vec<u8> {
        let refs: Vec<(u16, &Value)> = vals.iter().map(|(c, v)| (*c, v)).collect();
        let mut out = Vec::new();
        encode_attrs(t, &refs, &mut out).unwrap();
        out
    }

    /// A wide table: more var columns than a row being built keeps on the
    /// stack, up to the most columns a table may have, one buffer reused
    /// for every row (what it held before leaves no trace).
    #[test]
    fn rows_of_wide_tables_build_into_a_reused_buffer() {
        let mut row = RowBuf::default();
        for n in [2, VAR_INLINE, VAR_INLINE + 1, COLUMNS_MAX - 1] {
            let mut cols = vec![ColumnDef::new("id", ColumnType::Int { unsigned: false })];
            for i in 0..n {
                let c = ColumnDef::new(format!("v{i}"), ColumnType::VarChar(8));
                // Every third one nullable, the rest with a default.
                cols.push(if i % 3 == 0 {
                    c.nullable()
                } else {
                    c.default_value("d")
                });
            }
            let t = TableDef::new("w", cols, &["id"]).unwrap();
            let l = RowLayout::new(&t);
            let mut key = Vec::new();
            l.encode_key(&[Value::Int(n as i64)], &mut key).unwrap();
            // Every fifth column given, the last one too.
            let given: Vec<(u16, Value)> = (1..=n as u16)
                .filter(|c| c % 5 == 0 || *c == n as u16)
                .map(|c| (c, Value::Str(format!("x{c}"))))
                .collect();
            let a = attrs(&t, &given);
            let (a, _) = AttrSlice::parse(&a).unwrap();
            l.build_row_into(&key, a, &mut row).unwrap();
            let (fixed, var) = l.build_row(&key, a).unwrap();
            assert_eq!((&row.fixed, &row.var), (&fixed, &var), "{n} columns");
            assert!(l.key_matches(&row.fixed, &row.var, &key));
            // Reads find the var values on the stack or, past its
            // columns, on the heap.
            check_reads(&l, &fixed, &var);
            for c in 1..=n as u16 {
                let want = if c % 5 == 0 || c == n as u16 {
                    Some(format!("x{c}"))
                } else if (c - 1) % 3 == 0 {
                    None
                } else {
                    Some("d".to_string())
                };
                let got = l
                    .column_bytes(&row.fixed, &row.var, c)
                    .map(|b| String::from_utf8(b.to_vec()).unwrap());
                assert_eq!(got, want, "column {c} of {n}");
            }
            // A column given twice is refused, past the stack's columns too.
            let twice = [given.clone(), given.clone()].concat();
            let a = attrs(&t, &twice);
            let (a, _) = AttrSlice::parse(&a).unwrap();
            let e = l.build_row_into(&key, a, &mut row).unwrap_err();
            assert!(e.detail.contains("given twice"), "{e}");
        }
    }

    /// A column of a random table for [`reads_of_every_column_match_the_rows`]:
    /// its type and a value for a row (by a seed).
    fn random_column(kind: u8, seed: u64) -> (ColumnType, Value) {
        let bytes = |n: u16| (0..n).map(|i| (seed >> (i % 8)) as u8 ^ i as u8).collect();
        match kind % 8 {
            0 => (
                ColumnType::TinyInt { unsigned: false },
                Value::Int((seed % 100) as i64),
            ),
            1 => (
                ColumnType::SmallInt { unsigned: true },
                Value::UInt(seed % 60_000),
            ),
            2 => (
                ColumnType::Int { unsigned: true },
                Value::UInt(seed % 4_000_000_000),
            ),
            3 => (
                ColumnType::BigInt { unsigned: false },
                Value::Int(seed as i64),
            ),
            4 => (ColumnType::Double, Value::Double(seed as f64 / 7.0)),
            5 => (ColumnType::Binary(3), Value::Bytes(bytes(3))),
            6 => (ColumnType::Binary(8), Value::Bytes(bytes(8))),
            _ => {
                let n = (seed % 6) as u16;
                (ColumnType::VarBinary(12), Value::Bytes(bytes(n)))
            }
        }
    }

    /// The attribute list of `cols` of a stored row, one column at a time
    /// (`column_bytes`: the path the fast reads must agree with).
    fn read_one_by_one(l: &RowLayout, fixed: &[u8], var: &[u8], cols: &[u16]) -> Vec<u8> {
        let mut want = Vec::new();
        let mut w = AttrListWriter::begin(&mut want);
        for &c in cols {
            w.push(&mut want, c, l.column_bytes(fixed, var, c));
        }
        w.finish(&mut want);
        want
    }

    /// Reads of a stored row: every column (after bytes already in the
    /// buffer), every column by list, and some columns in another order
    /// with one of them twice, each checked against [`read_one_by_one`].
    fn check_reads(l: &RowLayout, fixed: &[u8], var: &[u8]) {
        let n = l.columns().len();
        let all: Vec<u16> = (0..n as u16).collect();
        let want = read_one_by_one(l, fixed, var, &all);
        let mut got = vec![9u8];
        l.read_all_attrs(fixed, var, &mut got);
        assert_eq!(&got[1..], &want[..]);
        let mut listed = Vec::new();
        l.read_attrs(fixed, var, n, all.iter().copied(), &mut listed);
        assert_eq!(listed, want);
        let mut some: Vec<u16> = (0..n as u16).rev().step_by(2).collect();
        some.push(some[0]);
        let want = read_one_by_one(l, fixed, var, &some);
        let mut got = Vec::new();
        l.read_attrs(fixed, var, some.len(), some.iter().copied(), &mut got);
        assert_eq!(got, want);
    }

    /// A table of `cols` (type and value, nullable, NULL in the row) with
    /// its key of type `key` at position `key_at`; the layout and a row.
    fn random_table_row(
        cols: &[((ColumnType, Value), bool, bool)],
        key: (ColumnType, Value),
        key_at: usize,
    ) -> (RowLayout, Vec<u8>, Vec<u8>) {
        let mut defs: Vec<ColumnDef> = cols
            .iter()
            .enumerate()
            .map(|(i, ((ty, _), nullable, _))| {
                let c = ColumnDef::new(format!("c{i}"), *ty);
                if *nullable {
                    c.nullable()
                } else {
                    c
                }
            })
            .collect();
        let key_at = key_at.min(defs.len());
        defs.insert(key_at, ColumnDef::new("id", key.0));
        let t = TableDef::new("r", defs, &["id"]).unwrap();
        let l = RowLayout::new(&t);
        let mut k = Vec::new();
        l.encode_key(std::slice::from_ref(&key.1), &mut k).unwrap();
        let vals: Vec<(u16, Value)> = cols
            .iter()
            .enumerate()
            .map(|(i, ((_, v), nullable, null))| {
                let id = if i < key_at { i } else { i + 1 };
                let v = if *nullable && *null {
                    Value::Null
                } else {
                    v.clone()
                };
                (id as u16, v)
            })
            .collect();
        let a = attrs(&t, &vals);
        let (a, _) = AttrSlice::parse(&a).unwrap();
        let (fixed, var) = l.build_row(&k, a).unwrap();
        (l, fixed, var)
    }

    proptest::proptest! {
        /// Reads of random tables and rows (fixed-only tables through the
        /// all-columns template, with and without NULLs; tables with var
        /// columns or var keys column by column) equal the values read
        /// one column at a time, and the template is used exactly when it
        /// should be.
        #[test]
        fn reads_of_every_column_match_the_rows(
            cols in proptest::collection::vec((0u8..8, proptest::bool::ANY, proptest::bool::ANY, proptest::num::u64::ANY), 0..40),
            fixed_only in proptest::bool::ANY,
            no_nulls in proptest::bool::ANY,
            key_kind in 0u8..3,
            key_at in 0usize..40,
        ) {
            let cols: Vec<_> = cols
                .iter()
                .map(|&(k, nullable, null, seed)| {
                    let k = if fixed_only { k % 7 } else { k };
                    (random_column(k, seed), nullable, null && !no_nulls)
                })
                .collect();
            let key = match key_kind {
                0 => (ColumnType::Int { unsigned: false }, Value::Int(7)),
                1 => (ColumnType::Binary(4), Value::Bytes(vec![1, 2, 3, 4])),
                _ => (ColumnType::VarBinary(6), Value::Bytes(vec![5, 6])),
            };
            let (l, fixed, var) = random_table_row(&cols, key, key_at);
            let has_null = cols.iter().any(|(_, nullable, null)| *nullable && *null);
            let answer_bytes: usize = 2 + l.columns().len() * 4 + fixed.len();
            let templated = !l.has_var_part() && !has_null && answer_bytes <= AllColumns::ANSWER_MAX;
            proptest::prop_assert_eq!(l.all_columns_template(&fixed).is_some(), templated);
            check_reads(&l, &fixed, &var);
        }
    }

    /// flexasynch's row (25 four-byte columns, none NULL), and rows with a
    /// null bitmap of several bytes all zero (the template) or with one
    /// NULL in its last byte (column by column).
    #[test]
    fn reads_of_wide_fixed_rows_use_the_template_when_no_column_is_null() {
        let int = |seed| random_column(2, seed);
        let key = (ColumnType::Int { unsigned: true }, Value::UInt(3));
        let flex: Vec<_> = (0..24).map(|i| (int(i), false, false)).collect();
        let (l, fixed, var) = random_table_row(&flex, key.clone(), 0);
        assert!(l.all_columns_template(&fixed).is_some());
        check_reads(&l, &fixed, &var);
        for null_at in [None, Some(16)] {
            let cols: Vec<_> = (0..17)
                .map(|i| (int(i), true, Some(i as usize) == null_at))
                .collect();
            let (l, fixed, var) = random_table_row(&cols, key.clone(), 5);
            assert_eq!(l.all_columns_template(&fixed).is_some(), null_at.is_none());
            check_reads(&l, &fixed, &var);
        }
        // A row whose answer is past the template's size: column by column.
        let wide: Vec<_> = (0..12)
            .map(|i| {
                (
                    (ColumnType::Binary(400), Value::Bytes(vec![i; 400])),
                    false,
                    false,
                )
            })
            .collect();
        let (l, fixed, var) = random_table_row(&wide, key, 0);
        assert!(l.all_columns.is_none());
        check_reads(&l, &fixed, &var);
    }

    /// A read's column list may name each column of the table once.
    #[test]
    fn a_read_names_each_column_once() {
        let l = RowLayout::new(&table());
        assert!(l.check_column_ids([0, 1, 2].into_iter()).is_ok());
        let e = l.check_column_ids([0, 2, 0].into_iter()).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest);
        assert!(e.detail.contains("named twice"), "{e}");
        let e = l.check_column_ids([9].into_iter()).unwrap_err();
        assert_eq!(e.code, ErrorCode::NoSuchColumn);
    }

    #[test]
    fn build_read_update_round_trip() {
        let t = table();
        let l = RowLayout::new(&t);
        assert_eq!(l.key_prefix_len, None);
        let mut key = Vec::new();
        l.encode_key(&[Value::Int(5), Value::Bytes(vec![1, 2])], &mut key)
            .unwrap();
        let a = attrs(&t, &[(0, "hi".into())]);
        let (a, rest) = AttrSlice::parse(&a).unwrap();
        assert!(rest.is_empty());
        let (fixed, var) = l.build_row(&key, a).unwrap();
        assert!(l.key_matches(&fixed, &var, &key));
        assert_eq!(
            l.column_bytes(&fixed, &var, 2),
            Some(&7u64.to_le_bytes()[..])
        );
        assert_eq!(l.column_bytes(&fixed, &var, 3), None);
        let mut out = Vec::new();
        l.read_all_attrs(&fixed, &var, &mut out);
        let (read, _) = AttrSlice::parse(&out).unwrap();
        let vals: Vec<_> = read.iter().collect();
        assert_eq!(vals.len(), 5);
        assert_eq!(
            decode_value(t.columns[0].ty, vals[0].1.unwrap()),
            Value::Str("hi".into())
        );

        let up = attrs(&t, &[(0, Value::Null), (3, "xy".into())]);
        let (up, _) = AttrSlice::parse(&up).unwrap();
        let (f2, v2) = l.update_row(&fixed, &var, up).unwrap();
        let v2 = v2.unwrap();
        assert_eq!(l.column_bytes(&f2, &v2, 0), None);
        assert_eq!(l.column_bytes(&f2, &v2, 3), Some(&b"xy "[..]));
        assert!(l.key_matches(&f2, &v2, &key));
    }

    #[test]
    fn rejects_bad_rows() {
        let t = table();
        let l = RowLayout::new(&t);
        let mut key = Vec::new();
        l.encode_key(&[Value::Int(5), Value::Bytes(vec![1])], &mut key)
            .unwrap();
        let none = [0u8, 0];
        let (empty, _) = AttrSlice::parse(&none).unwrap();
        assert!(l.build_row(&key, empty).is_ok());
        assert_eq!(
            l.build_row(&key[..3], empty).unwrap_err().code,
            ErrorCode::BadPrimaryKey
        );
        let mut longer = key.clone();
        longer.push(0);
        assert_eq!(
            l.build_row(&longer, empty).unwrap_err().code,
            ErrorCode::BadPrimaryKey
        );
        // NULL into NOT NULL.
        let mut raw = Vec::new();
        let mut w = AttrListWriter::begin(&mut raw);
        w.push(&mut raw, 2, None);
        w.finish(&mut raw);
        let (a, _) = AttrSlice::parse(&raw).unwrap();
        assert_eq!(
            l.build_row(&key, a).unwrap_err().code,
            ErrorCode::IllegalNull
        );
        // Wrong length for a BIGINT.
        let mut raw = Vec::new();
        let mut w = AttrListWriter::begin(&mut raw);
        w.push(&mut raw, 2, Some(&[1, 2, 3]));
        w.finish(&mut raw);
        let (a, _) = AttrSlice::parse(&raw).unwrap();
        assert_eq!(l.build_row(&key, a).unwrap_err().code, ErrorCode::BadValue);
        // Unknown column and key column as a value.
        for col in [9u16, 1] {
            let mut raw = Vec::new();
            let mut w = AttrListWriter::begin(&mut raw);
            w.push(&mut raw, col, Some(&[0, 0, 0, 0]));
            w.finish(&mut raw);
            let (a, _) = AttrSlice::parse(&raw).unwrap();
            assert!(l.build_row(&key, a).is_err());
        }
        // Truncated attribute lists are refused by the parser.
        assert!(AttrSlice::parse(&[1, 0, 0]).is_err());
        assert!(AttrSlice::parse(&[1, 0, 0, 0, 5, 0, 1]).is_err());
    }

    #[test]
    fn fixed_keys_are_a_prefix() {
        let t = TableDef::new(
            "f",
            vec![
                ColumnDef::new("v", ColumnType::Int { unsigned: true }),
                ColumnDef::new("k", ColumnType::Int { unsigned: true }),
            ],
            &["k"],
        )
        .unwrap();
        let l = RowLayout::new(&t);
        assert_eq!(l.key_prefix_len, Some(4));
        assert_eq!(l.fixed_size, 8);
        assert!(!l.has_var_part());
        let mut key = Vec::new();
        l.encode_key(&[Value::UInt(9)], &mut key).unwrap();
        let a = attrs(&t, &[(0, Value::UInt(3))]);
        let (a, _) = AttrSlice::parse(&a).unwrap();
        let (fixed, var) = l.build_row(&key, a).unwrap();
        assert_eq!(&fixed[..4], &9u32.to_le_bytes());
        assert!(var.is_empty());
    }
}
