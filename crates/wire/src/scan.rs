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

/// trans, table, version, lock, reserved ×3, batch_rows, batch_bytes,
/// columns_len, filter_len.
pub(crate) const SCAN_TAB_REQ_FIXED_BYTES: usize = 8 + 4 + 4 + 1 + 3 + 4 + 4 + 4 + 4;
pub(crate) const SCAN_NEXT_REQ_BYTES: usize = 8 + 4 + 1 + 1;
/// trans, request, done, reserved, examined, count, rows_len.
pub(crate) const SCAN_TAB_CONF_FIXED_BYTES: usize = 8 + 4 + 1 + 1 + 8 + 4 + 4;
/// trans, request, code, detail_len.
pub(crate) const SCAN_TAB_REF_FIXED_BYTES: usize = 8 + 4 + 2 + 2;

impl ScanTabReq {
    pub(crate) fn body_len(&self) -> usize {
        SCAN_TAB_REQ_FIXED_BYTES + self.columns.len() + self.filter.len()
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.trans.0);
        put_u32(out, self.table.0);
        put_u32(out, self.version.0);
        out.extend_from_slice(&[self.lock as u8, 0, 0, 0]);
        put_u32(out, self.batch_rows);
        put_u32(out, self.batch_bytes);
        put_len(out, self.columns.len(), "columns");
        out.extend_from_slice(&self.columns);
        put_len(out, self.filter.len(), "filter");
        out.extend_from_slice(&self.filter);
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body, "ScanTabReq");
        let trans = TransId(r.u64("trans")?);
        let table = TableId(r.u32("table")?);
        let version = SchemaVersion(r.u32("version")?);
        let lock = r.enum_u8("lock", LockMode::from_u8)?;
        for _ in 0..3 {
            r.reserved_u8("reserved")?;
        }
        let batch_rows = r.u32("batch_rows")?;
        let batch_bytes = r.u32("batch_bytes")?;
        let len = r.u32("columns_len")? as usize;
        let columns = r.bytes(len, "columns")?.to_vec();
        let len = r.u32("filter_len")? as usize;
        let filter = r.bytes(len, "filter")?.to_vec();
        r.finish()?;
        Ok(ScanTabReq {
            trans,
            table,
            version,
            lock,
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
