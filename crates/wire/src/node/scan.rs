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

/// [`ScanSignal::FragConf`]'s `next_row` when the fragment has no more rows.
pub const SCAN_FRAG_END: u32 = u32::MAX;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanSignal {
    /// Coordinator → the fragment's primary: the next batch of rows from
    /// row id `from_row` on.
    FragReq {
        to: u16,
        /// The scan, as its coordinator numbers it; answers go to the
        /// node that sent this (`from`).
        scan: TxnRef,
        from: u16,
        table: TableId,
        version: SchemaVersion,
        frag: FragmentId,
        /// The fragment's batch number within the scan, echoed in the
        /// answer: a repeated request's second answer matches no batch.
        batch: u32,
        /// The distribution version the coordinator routed by: a replica
        /// at another version refuses (the primary moved).
        frag_version: u32,
        from_row: u32,
        /// Rows and bytes of rows to return at most (at least one row, if
        /// any is left, whatever its size).
        max_rows: u32,
        max_bytes: u32,
        /// A read list (as in a read `KeyOp`) and a filter program.
        columns: Vec<u8>,
        filter: Vec<u8>,
    },
    /// The primary → the coordinator: `count` rows (attribute lists back
    /// to back) of the `examined` rows looked at; the scan goes on at
    /// `next_row` ([`SCAN_FRAG_END`]: the fragment is done).
    FragConf {
        to: u16,
        scan: TxnRef,
        frag: FragmentId,
        batch: u32,
        next_row: u32,
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
                columns, filter, ..
            } => 8 + 2 + 4 + 4 + 4 + 4 + 4 + 4 + 4 + 4 + 4 + columns.len() + 4 + filter.len(),
            ScanSignal::FragConf { rows, .. } => 8 + 4 + 4 + 4 + 4 + 4 + 4 + rows.len(),
            ScanSignal::FragRef { detail, .. } => 8 + 4 + 4 + 2 + 2 + detail_prefix(detail).len(),
        }
    }

    /// The body after `to`.
    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        match self {
            ScanSignal::FragReq {
                scan,
                from,
                table,
                version,
                frag,
                batch,
                frag_version,
                from_row,
                max_rows,
                max_bytes,
                columns,
                filter,
                ..
            } => {
                put_u64(out, *scan);
                put_u16(out, *from);
                put_u32(out, table.0);
                put_u32(out, version.0);
                put_u32(out, *frag);
                put_u32(out, *batch);
                put_u32(out, *frag_version);
                put_u32(out, *from_row);
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
                next_row,
                examined,
                count,
                rows,
                ..
            } => {
                put_u64(out, *scan);
                put_u32(out, *frag);
                put_u32(out, *batch);
                put_u32(out, *next_row);
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
                let from = r.u16("from")?;
                let table = TableId(r.u32("table")?);
                let version = SchemaVersion(r.u32("version")?);
                let frag = r.u32("frag")?;
                let batch = r.u32("batch")?;
                let frag_version = r.u32("frag_version")?;
                let from_row = r.u32("from_row")?;
                let max_rows = r.u32("max_rows")?;
                let max_bytes = r.u32("max_bytes")?;
                let len = r.u32("columns_len")? as usize;
                let columns = r.bytes(len, "columns")?.to_vec();
                let len = r.u32("filter_len")? as usize;
                let filter = r.bytes(len, "filter")?.to_vec();
                ScanSignal::FragReq {
                    to,
                    scan,
                    from,
                    table,
                    version,
                    frag,
                    batch,
                    frag_version,
                    from_row,
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
                let next_row = r.u32("next_row")?;
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
                    next_row,
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
            from: 1,
            table: TableId(4),
            version: SchemaVersion(3),
            frag: 5,
            batch: 3,
            frag_version: 9,
            from_row: 0,
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
            next_row: SCAN_FRAG_END,
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
