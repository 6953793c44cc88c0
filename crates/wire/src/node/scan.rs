//! Node signals of scans (NDB's SCAN_FRAGREQ / SCAN_FRAGCONF): the
//! coordinator of a scan asks the primary replica of each fragment for the
//! next batch of its rows from a row-id cursor; the replica answers with
//! the rows its filter kept and where to go on. LQH keeps nothing between
//! batches, so a failed coordinator leaves nothing behind. docs/PROTOCOL.md
//! §12.
//!
//! Every signal names the node it is for (`to`, written by
//! `ClusterSignal::encode_body` before the body here).

use super::TxnRef;
use crate::frame::WireError;
use crate::signals::{detail_prefix, put_detail, put_u16, put_u32, put_u64, Reader};
use shoal_types::distribution::FragmentId;
use shoal_types::{SchemaVersion, TableId};

pub const GSN_SCAN_FRAG_REQ: u16 = 63;
pub const GSN_SCAN_FRAG_CONF: u16 = 64;
pub const GSN_SCAN_FRAG_REF: u16 = 65;
/// The last scan GSN.
pub const GSN_SCAN_LAST: u16 = GSN_SCAN_FRAG_REF;

/// [`ScanCursor::row`] when the fragment has no more rows.
pub const SCAN_FRAG_END: u32 = u32::MAX;

/// Where a fragment's scan goes on. A table scan: at row id `row` (`range`
/// 0, `key` empty). An index scan: in range number `range` of its bounds,
/// from the range's start if `key` is empty, else just past the entry
/// (`key`, `row`) in the scan's direction. `row` [`SCAN_FRAG_END`]: the
/// fragment is done.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanCursor {
    pub range: u16,
    pub row: u32,
    pub key: Vec<u8>,
}

impl ScanCursor {
    pub fn is_end(&self) -> bool {
        self.row == SCAN_FRAG_END
    }

    pub fn end() -> ScanCursor {
        ScanCursor {
            range: 0,
            row: SCAN_FRAG_END,
            key: Vec::new(),
        }
    }

    fn encoded_len(&self) -> usize {
        2 + 4 + 2 + self.key.len()
    }

    fn encode(&self, out: &mut Vec<u8>) {
        put_u16(out, self.range);
        put_u32(out, self.row);
        put_u16(out, self.key.len() as u16);
        out.extend_from_slice(&self.key);
    }

    fn decode(r: &mut Reader<'_>) -> Result<ScanCursor, WireError> {
        let range = r.u16("range")?;
        let row = r.u32("row")?;
        let len = usize::from(r.u16("key_len")?);
        let key = r.bytes(len, "key")?.to_vec();
        Ok(ScanCursor { range, row, key })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanSignal {
    /// Coordinator → the fragment's primary: the next batch of rows from
    /// row id `from_row` on.
    FragReq {
        to: u16,
        /// The scan, as its coordinator numbers it; answers go to the
        /// coordinator's node, `tc`.
        scan: TxnRef,
        tc: u16,
        table: TableId,
        version: SchemaVersion,
        frag: FragmentId,
        /// The fragment's batch number within the scan, echoed in the
        /// answer: a repeated request's second answer matches no batch.
        batch: u32,
        /// The distribution version the coordinator routed by: a replica
        /// at another version refuses (the primary moved).
        frag_version: u32,
        /// An ordered index's number, or [`crate::scan::SCAN_NO_INDEX`].
        index: u16,
        /// `crate::scan::SCAN_*` flags.
        flags: u8,
        /// The index scan's ranges (`crate::scan::encode_bounds`).
        bounds: Vec<u8>,
        from: ScanCursor,
        /// Rows and bytes of rows to return at most (at least one row, if
        /// any is left, whatever its size).
        max_rows: u32,
        max_bytes: u32,
        /// A read list (as in a read `KeyOp`) and a filter program.
        columns: Vec<u8>,
        filter: Vec<u8>,
    },
    /// The primary → the coordinator: `count` rows of the `examined` rows
    /// looked at, as attribute lists back to back (an ordered scan's each
    /// as `u16 key_len | key | u32 attrs_len | attrs`: its index key, then
    /// the list framed by its length); the scan goes on at `next`.
    FragConf {
        to: u16,
        scan: TxnRef,
        frag: FragmentId,
        batch: u32,
        next: ScanCursor,
        examined: u32,
        count: u32,
        rows: Vec<u8>,
    },
    /// The primary → the coordinator: this fragment cannot be scanned
    /// (the scan fails with `code`).
    FragRef {
        to: u16,
        scan: TxnRef,
        frag: FragmentId,
        batch: u32,
        code: u16,
        detail: String,
    },
}

impl ScanSignal {
    pub fn to(&self) -> u16 {
        match self {
            ScanSignal::FragReq { to, .. }
            | ScanSignal::FragConf { to, .. }
            | ScanSignal::FragRef { to, .. } => *to,
        }
    }

    pub(crate) fn set_to(&mut self, node: u16) {
        match self {
            ScanSignal::FragReq { to, .. }
            | ScanSignal::FragConf { to, .. }
            | ScanSignal::FragRef { to, .. } => *to = node,
        }
    }

    pub fn gsn(&self) -> u16 {
        match self {
            ScanSignal::FragReq { .. } => GSN_SCAN_FRAG_REQ,
            ScanSignal::FragConf { .. } => GSN_SCAN_FRAG_CONF,
            ScanSignal::FragRef { .. } => GSN_SCAN_FRAG_REF,
        }
    }

    /// Bytes of the body after `to`.
    pub(crate) fn body_len(&self) -> usize {
        match self {
            ScanSignal::FragReq {
                columns,
                filter,
                bounds,
                from,
                ..
            } => {
                8 + 2
                    + 4
                    + 4
                    + 4
                    + 4
                    + 4
                    + 2
                    + 1
                    + 1
                    + 4
                    + bounds.len()
                    + from.encoded_len()
                    + 4
                    + 4
                    + 4
                    + columns.len()
                    + 4
                    + filter.len()
            }
            ScanSignal::FragConf { rows, next, .. } => {
                8 + 4 + 4 + next.encoded_len() + 4 + 4 + 4 + rows.len()
            }
            ScanSignal::FragRef { detail, .. } => 8 + 4 + 4 + 2 + 2 + detail_prefix(detail).len(),
        }
    }

    /// The body after `to`.
    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        match self {
            ScanSignal::FragReq {
                scan,
                tc,
                table,
                version,
                frag,
                batch,
                frag_version,
                index,
                flags,
                bounds,
                from,
                max_rows,
                max_bytes,
                columns,
                filter,
                ..
            } => {
                put_u64(out, *scan);
                put_u16(out, *tc);
                put_u32(out, table.0);
                put_u32(out, version.0);
                put_u32(out, *frag);
                put_u32(out, *batch);
                put_u32(out, *frag_version);
                put_u16(out, *index);
                out.push(*flags);
                out.push(0);
                put_u32(out, bounds.len() as u32);
                out.extend_from_slice(bounds);
                from.encode(out);
                put_u32(out, *max_rows);
                put_u32(out, *max_bytes);
                put_u32(out, columns.len() as u32);
                out.extend_from_slice(columns);
                put_u32(out, filter.len() as u32);
                out.extend_from_slice(filter);
            }
            ScanSignal::FragConf {
                scan,
                frag,
                batch,
                next,
                examined,
                count,
                rows,
                ..
            } => {
                put_u64(out, *scan);
                put_u32(out, *frag);
                put_u32(out, *batch);
                next.encode(out);
                put_u32(out, *examined);
                put_u32(out, *count);
                put_u32(out, rows.len() as u32);
                out.extend_from_slice(rows);
            }
            ScanSignal::FragRef {
                scan,
                frag,
                batch,
                code,
                detail,
                ..
            } => {
                put_u64(out, *scan);
                put_u32(out, *frag);
                put_u32(out, *batch);
                put_u16(out, *code);
                put_detail(out, detail);
            }
        }
    }

    /// Decodes the body of scan signal `gsn` after `to`; `None` if `gsn`
    /// is not a scan signal.
    pub(crate) fn decode(
        gsn: u16,
        to: u16,
        r: &mut Reader<'_>,
    ) -> Result<Option<ScanSignal>, WireError> {
        Ok(Some(match gsn {
            GSN_SCAN_FRAG_REQ => {
                let scan = r.u64("scan")?;
                let tc = r.u16("tc")?;
                let table = TableId(r.u32("table")?);
                let version = SchemaVersion(r.u32("version")?);
                let frag = r.u32("frag")?;
                let batch = r.u32("batch")?;
                let frag_version = r.u32("frag_version")?;
                let index = r.u16("index")?;
                let flags = r.u8("flags")?;
                r.reserved_u8("reserved")?;
                let len = r.u32("bounds_len")? as usize;
                let bounds = r.bytes(len, "bounds")?.to_vec();
                let from = ScanCursor::decode(r)?;
                let max_rows = r.u32("max_rows")?;
                let max_bytes = r.u32("max_bytes")?;
                let len = r.u32("columns_len")? as usize;
                let columns = r.bytes(len, "columns")?.to_vec();
                let len = r.u32("filter_len")? as usize;
                let filter = r.bytes(len, "filter")?.to_vec();
                ScanSignal::FragReq {
                    to,
                    scan,
                    tc,
                    table,
                    version,
                    frag,
                    batch,
                    frag_version,
                    index,
                    flags,
                    bounds,
                    from,
                    max_rows,
                    max_bytes,
                    columns,
                    filter,
                }
            }
            GSN_SCAN_FRAG_CONF => {
                let scan = r.u64("scan")?;
                let frag = r.u32("frag")?;
                let batch = r.u32("batch")?;
                let next = ScanCursor::decode(r)?;
                let examined = r.u32("examined")?;
                let count_at = r.pos;
                let count = r.u32("count")?;
                let len = r.u32("rows_len")? as usize;
                if count as usize > len / 2 {
                    return Err(r.malformed_at(
                        count_at,
                        format_args!("{count} rows in {len} bytes (each takes at least 2)"),
                    ));
                }
                let rows = r.bytes(len, "rows")?.to_vec();
                ScanSignal::FragConf {
                    to,
                    scan,
                    frag,
                    batch,
                    next,
                    examined,
                    count,
                    rows,
                }
            }
            GSN_SCAN_FRAG_REF => {
                let scan = r.u64("scan")?;
                let frag = r.u32("frag")?;
                let batch = r.u32("batch")?;
                let code = r.u16("code")?;
                let len = usize::from(r.u16("detail_len")?);
                ScanSignal::FragRef {
                    to,
                    scan,
                    frag,
                    batch,
                    code,
                    detail: r.utf8(len, "detail")?,
                }
            }
            _ => return Ok(None),
        }))
    }
}

#[cfg(test)]
pub(crate) fn samples() -> Vec<ScanSignal> {
    vec![
        ScanSignal::FragReq {
            to: 2,
            scan: 1 << 50,
            tc: 1,
            table: TableId(4),
            version: SchemaVersion(3),
            frag: 5,
            batch: 3,
            frag_version: 9,
            index: 2,
            flags: 3,
            bounds: vec![1, 0, 0],
            from: ScanCursor {
                range: 1,
                row: 7,
                key: vec![1, 2, 3],
            },
            max_rows: 64,
            max_bytes: 1 << 20,
            columns: vec![0xFF, 0xFF],
            filter: vec![0x01],
        },
        ScanSignal::FragConf {
            to: 1,
            scan: 7,
            frag: 5,
            batch: 3,
            next: ScanCursor::end(),
            examined: 100,
            count: 1,
            rows: vec![0, 0],
        },
        ScanSignal::FragRef {
            to: 1,
            scan: 7,
            frag: 5,
            batch: 0,
            code: 1204,
            detail: "moved".into(),
        },
    ]
}
