//! Scans between a client and the coordinator it asks (docs/PROTOCOL.md
//! §12): the client opens a scan of a table with `ScanTabReq`, gets its
//! rows a round at a time in `ScanTabConf`s, asks for each next round with
//! `ScanNextReq` (or closes the scan with it), and a failed scan ends with
//! `ScanTabRef`.
//!
//! Every answer names the request it answers (`request`: 0 for the
//! `ScanTabReq`, then 1, 2, ... for each `ScanNextReq`), so a client can
//! wait for answers the way it waits for `TcKeyConf`s.

use crate::frame::WireError;

/// [`ScanTabReq::index`] of a scan of the table itself.
pub const SCAN_NO_INDEX: u16 = u16::MAX;
/// [`ScanTabReq::flags`]: walk the index from its high end down.
pub const SCAN_DESCENDING: u8 = 1;
/// [`ScanTabReq::flags`]: rows in index order across all fragments (the
/// coordinator merges the fragments' streams).
pub const SCAN_ORDERED: u8 = 2;
/// Every flag this version defines.
pub const SCAN_FLAGS_KNOWN: u8 = SCAN_DESCENDING | SCAN_ORDERED;
/// Most ranges one index scan may carry.
pub const SCAN_RANGES_MAX: usize = 1024;

/// One range of an index scan: index keys (`shoal_types::index_key`) or
/// prefixes of them. A bound on a prefix compares only that many bytes of
/// each key: `low` inclusive keeps keys whose prefix is at or past it,
/// `high` inclusive keeps keys whose prefix is at or before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRange<'a> {
    /// (bound, inclusive); `None`: from the index's start.
    pub low: Option<(&'a [u8], bool)>,
    /// (bound, inclusive); `None`: to the index's end.
    pub high: Option<(&'a [u8], bool)>,
}

impl KeyRange<'_> {
    /// The whole index.
    pub const ALL: KeyRange<'static> = KeyRange {
        low: None,
        high: None,
    };

    /// Whether `key` is at or past the low bound.
    #[inline]
    pub fn above_low(&self, key: &[u8]) -> bool {
        match self.low {
            None => true,
            Some((b, incl)) => {
                let p = &key[..b.len().min(key.len())];
                if incl {
                    p >= b
                } else {
                    p > b
                }
            }
        }
    }

    /// Whether `key` is at or before the high bound.
    #[inline]
    pub fn below_high(&self, key: &[u8]) -> bool {
        match self.high {
            None => true,
            Some((b, incl)) => {
                let p = &key[..b.len().min(key.len())];
                if incl {
                    p <= b
                } else {
                    p < b
                }
            }
        }
    }
}

const RANGE_LOW: u8 = 1;
const RANGE_LOW_INCLUSIVE: u8 = 2;
const RANGE_HIGH: u8 = 4;
const RANGE_HIGH_INCLUSIVE: u8 = 8;

/// Encodes ranges: `u16 count | count × (u8 flags | u16 low_len | low |
/// u16 high_len | high)`. Bounds longer than `u16::MAX` bytes are a
/// caller's bug.
pub fn encode_bounds(ranges: &[KeyRange<'_>], out: &mut Vec<u8>) {
    put_u16(out, ranges.len() as u16);
    for r in ranges {
        let mut flags = 0;
        if let Some((_, incl)) = r.low {
            flags |= RANGE_LOW | if incl { RANGE_LOW_INCLUSIVE } else { 0 };
        }
        if let Some((_, incl)) = r.high {
            flags |= RANGE_HIGH | if incl { RANGE_HIGH_INCLUSIVE } else { 0 };
        }
        out.push(flags);
        for b in [r.low, r.high] {
            let b = b.map_or(&[][..], |(b, _)| b);
            put_u16(out, u16::try_from(b.len()).expect("a bound fits u16"));
            out.extend_from_slice(b);
        }
    }
}

/// Decodes ranges written by [`encode_bounds`]; empty bytes: the whole
/// index. An error says what is malformed.
pub fn decode_bounds(bytes: &[u8]) -> Result<Vec<KeyRange<'_>>, String> {
    if bytes.is_empty() {
        return Ok(vec![KeyRange::ALL]);
    }
    let mut r = Reader::new(bytes, "scan bounds");
    let count = usize::from(r.u16("count").map_err(|e| e.to_string())?);
    if count == 0 || count > SCAN_RANGES_MAX {
        return Err(format!("{count} ranges; 1..={SCAN_RANGES_MAX} allowed"));
    }
    let mut ranges = Vec::with_capacity(count);
    for _ in 0..count {
        let flags = r.u8("flags").map_err(|e| e.to_string())?;
        if flags & !(RANGE_LOW | RANGE_LOW_INCLUSIVE | RANGE_HIGH | RANGE_HIGH_INCLUSIVE) != 0 {
            return Err(format!("range flags {flags:#04x}"));
        }
        let mut read = |present: bool, incl: bool| -> Result<Option<(&[u8], bool)>, String> {
            let len = usize::from(r.u16("bound_len").map_err(|e| e.to_string())?);
            let b = r.bytes(len, "bound").map_err(|e| e.to_string())?;
            if !present && len != 0 {
                return Err("bytes for an absent bound".into());
            }
            Ok(present.then_some((b, incl)))
        };
        let low = read(flags & RANGE_LOW != 0, flags & RANGE_LOW_INCLUSIVE != 0)?;
        let high = read(flags & RANGE_HIGH != 0, flags & RANGE_HIGH_INCLUSIVE != 0)?;
        ranges.push(KeyRange { low, high });
    }
    r.finish().map_err(|e| e.to_string())?;
    Ok(ranges)
}
use crate::signals::{detail_prefix, put_detail, put_u16, put_u32, put_u64, LockMode, Reader};
use shoal_types::{SchemaVersion, TableId, TransId};

/// Client → coordinator: scan `table`, returning `columns` of the rows
/// that `filter` keeps, about `batch_rows` rows and `batch_bytes` bytes a
/// round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanTabReq {
    /// Names the scan in every answer (from the client's transaction id
    /// counter; unique among the client's open requests).
    pub trans: TransId,
    pub table: TableId,
    pub version: SchemaVersion,
    /// Only `CommittedRead` today: the newest committed image of each
    /// row, no locks.
    pub lock: LockMode,
    /// `SCAN_*` flags (index scans only).
    pub flags: u8,
    /// The ordered index to scan (its number in the table's definition),
    /// or [`SCAN_NO_INDEX`].
    pub index: u16,
    /// The index scan's ranges ([`encode_bounds`]); empty: the whole
    /// index (or the whole table).
    pub bounds: Vec<u8>,
    /// Rows a round should bring at most (at least one row per fragment
    /// asked, so a round may bring more when the table has many
    /// fragments).
    pub batch_rows: u32,
    /// Bytes of rows a round should bring at most (the coordinator
    /// lowers it to what fits one answer).
    pub batch_bytes: u32,
    /// The columns to return: a read list as in `KeyOp::attrs` of a read
    /// (`u16 count` + column ids, or `0xFFFF`: every column).
    pub columns: Vec<u8>,
    /// A filter program (`shoal_types::filter`); empty: every row.
    pub filter: Vec<u8>,
}

/// Client → coordinator: the rows of the last round are taken; send the
/// next round (`close: false`) or end the scan (`close: true`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanNextReq {
    pub trans: TransId,
    /// 1 for the first `ScanNextReq` of a scan, then 2, 3, ...
    pub request: u32,
    pub close: bool,
}

/// Coordinator → client: one round of rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanTabConf {
    pub trans: TransId,
    pub request: u32,
    /// No rows follow this round: the scan is over and forgotten by the
    /// coordinator (also the answer to a close).
    pub done: bool,
    /// Rows the data nodes looked at for this round (filtered out ones
    /// included).
    pub examined: u64,
    /// How many rows `rows` holds.
    pub count: u32,
    /// `count` attribute lists, one per row, back to back (each is
    /// self-delimiting: `shoal_types::AttrSlice::parse`).
    pub rows: Vec<u8>,
}

/// Coordinator → client: the scan failed and is over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanTabRef {
    pub trans: TransId,
    pub request: u32,
    pub code: u16,
    pub detail: String,
}

/// trans, table, version, lock, flags, index, batch_rows, batch_bytes,
/// columns_len, filter_len, bounds_len.
pub(crate) const SCAN_TAB_REQ_FIXED_BYTES: usize = 8 + 4 + 4 + 1 + 1 + 2 + 4 + 4 + 4 + 4 + 4;
pub(crate) const SCAN_NEXT_REQ_BYTES: usize = 8 + 4 + 1 + 1;
/// trans, request, done, reserved, examined, count, rows_len.
pub(crate) const SCAN_TAB_CONF_FIXED_BYTES: usize = 8 + 4 + 1 + 1 + 8 + 4 + 4;
/// trans, request, code, detail_len.
pub(crate) const SCAN_TAB_REF_FIXED_BYTES: usize = 8 + 4 + 2 + 2;

impl ScanTabReq {
    pub(crate) fn body_len(&self) -> usize {
        SCAN_TAB_REQ_FIXED_BYTES + self.columns.len() + self.filter.len() + self.bounds.len()
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.trans.0);
        put_u32(out, self.table.0);
        put_u32(out, self.version.0);
        out.extend_from_slice(&[self.lock as u8, self.flags]);
        put_u16(out, self.index);
        put_u32(out, self.batch_rows);
        put_u32(out, self.batch_bytes);
        put_len(out, self.columns.len(), "columns");
        out.extend_from_slice(&self.columns);
        put_len(out, self.filter.len(), "filter");
        out.extend_from_slice(&self.filter);
        put_len(out, self.bounds.len(), "bounds");
        out.extend_from_slice(&self.bounds);
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body, "ScanTabReq");
        let trans = TransId(r.u64("trans")?);
        let table = TableId(r.u32("table")?);
        let version = SchemaVersion(r.u32("version")?);
        let lock = r.enum_u8("lock", LockMode::from_u8)?;
        let flags_at = r.pos;
        let flags = r.u8("flags")?;
        if flags & !SCAN_FLAGS_KNOWN != 0 {
            return Err(r.malformed_at(flags_at, format_args!("unknown scan flags {flags:#04x}")));
        }
        let index = r.u16("index")?;
        let batch_rows = r.u32("batch_rows")?;
        let batch_bytes = r.u32("batch_bytes")?;
        let len = r.u32("columns_len")? as usize;
        let columns = r.bytes(len, "columns")?.to_vec();
        let len = r.u32("filter_len")? as usize;
        let filter = r.bytes(len, "filter")?.to_vec();
        let len = r.u32("bounds_len")? as usize;
        let bounds = r.bytes(len, "bounds")?.to_vec();
        r.finish()?;
        Ok(ScanTabReq {
            trans,
            table,
            version,
            lock,
            flags,
            index,
            bounds,
            batch_rows,
            batch_bytes,
            columns,
            filter,
        })
    }
}

impl ScanNextReq {
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.trans.0);
        put_u32(out, self.request);
        out.push(u8::from(self.close));
        out.push(0);
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body, "ScanNextReq");
        let trans = TransId(r.u64("trans")?);
        let request = r.u32("request")?;
        let close = crate::node::read_flag(&mut r, "close")?;
        r.reserved_u8("reserved")?;
        r.finish()?;
        Ok(ScanNextReq {
            trans,
            request,
            close,
        })
    }
}

impl ScanTabConf {
    pub(crate) fn body_len(&self) -> usize {
        SCAN_TAB_CONF_FIXED_BYTES + self.rows.len()
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.trans.0);
        put_u32(out, self.request);
        out.push(u8::from(self.done));
        out.push(0);
        put_u64(out, self.examined);
        put_u32(out, self.count);
        put_len(out, self.rows.len(), "rows");
        out.extend_from_slice(&self.rows);
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body, "ScanTabConf");
        let trans = TransId(r.u64("trans")?);
        let request = r.u32("request")?;
        let done = crate::node::read_flag(&mut r, "done")?;
        r.reserved_u8("reserved")?;
        let examined = r.u64("examined")?;
        let count = r.u32("count")?;
        let len = r.u32("rows_len")? as usize;
        // Each row is an attribute list of at least its two-byte count.
        let count_at = r.pos;
        if count as usize > len / 2 {
            return Err(r.malformed_at(
                count_at,
                format_args!("{count} rows in {len} bytes (each takes at least 2)"),
            ));
        }
        let rows = r.bytes(len, "rows")?.to_vec();
        r.finish()?;
        Ok(ScanTabConf {
            trans,
            request,
            done,
            examined,
            count,
            rows,
        })
    }
}

impl ScanTabRef {
    pub(crate) fn body_len(&self) -> usize {
        SCAN_TAB_REF_FIXED_BYTES + detail_prefix(&self.detail).len()
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.trans.0);
        put_u32(out, self.request);
        put_u16(out, self.code);
        put_detail(out, &self.detail);
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body, "ScanTabRef");
        let trans = TransId(r.u64("trans")?);
        let request = r.u32("request")?;
        let code = r.u16("code")?;
        let len = usize::from(r.u16("detail_len")?);
        let detail = r.utf8(len, "detail")?;
        r.finish()?;
        Ok(ScanTabRef {
            trans,
            request,
            code,
            detail,
        })
    }
}

/// Writes a `u32` length; a field longer than that is a caller's bug (it
/// must check its limits first).
fn put_len(out: &mut Vec<u8>, len: usize, what: &str) {
    let len = u32::try_from(len).unwrap_or_else(|_| panic!("{what} of {len} bytes exceed u32"));
    put_u32(out, len);
}
