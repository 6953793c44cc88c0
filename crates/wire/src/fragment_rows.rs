//! Reading one replica of a fragment as it is stored: the committed rows,
//! with their row ids, in row-id order, a page at a time. For checking
//! that the replicas of a fragment agree row by row (`shoal verify`), not
//! for applications: it takes no locks, so it is only meaningful while no
//! transaction writes the fragment.

use crate::frame::WireError;
use crate::signals::{put_u16, put_u32, put_u64, Reader};
use shoal_types::{TableId, TransId};

/// [`FragmentRowsConf::next_row`] when the fragment has no more rows.
pub const FRAGMENT_ROWS_END: u32 = u32::MAX;

/// Client → data node: the committed rows of this node's replica of
/// fragment `frag` of `table` from row id `from_row` on, at most about
/// `max_bytes` of them (at least one row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragmentRowsReq {
    /// Names the request in its answer (from the client's transaction id
    /// counter).
    pub trans: TransId,
    pub table: TableId,
    pub frag: u32,
    pub from_row: u32,
    pub max_bytes: u32,
}

/// Data node → client: a page of rows (row id, every column as an
/// attribute list), or an error `code` (then no rows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FragmentRowsConf {
    pub trans: TransId,
    pub code: u16,
    /// Where the next page starts, or [`FRAGMENT_ROWS_END`].
    pub next_row: u32,
    pub rows: Vec<(u32, Vec<u8>)>,
}

pub(crate) const REQ_BYTES: usize = 8 + 4 + 4 + 4 + 4;
pub(crate) const CONF_FIXED_BYTES: usize = 8 + 2 + 4 + 4;
/// row id, data length.
pub(crate) const ROW_FIXED_BYTES: usize = 4 + 4;

impl FragmentRowsReq {
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.trans.0);
        put_u32(out, self.table.0);
        put_u32(out, self.frag);
        put_u32(out, self.from_row);
        put_u32(out, self.max_bytes);
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body, "FragmentRowsReq");
        let req = FragmentRowsReq {
            trans: TransId(r.u64("trans")?),
            table: TableId(r.u32("table")?),
            frag: r.u32("frag")?,
            from_row: r.u32("from_row")?,
            max_bytes: r.u32("max_bytes")?,
        };
        r.finish()?;
        Ok(req)
    }
}

impl FragmentRowsConf {
    pub(crate) fn body_len(&self) -> usize {
        CONF_FIXED_BYTES
            + self
                .rows
                .iter()
                .map(|(_, data)| ROW_FIXED_BYTES + data.len())
                .sum::<usize>()
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_u64(out, self.trans.0);
        put_u16(out, self.code);
        put_u32(out, self.next_row);
        put_u32(out, self.rows.len() as u32);
        for (row, data) in &self.rows {
            put_u32(out, *row);
            put_u32(out, data.len() as u32);
            out.extend_from_slice(data);
        }
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body, "FragmentRowsConf");
        let trans = TransId(r.u64("trans")?);
        let code = r.u16("code")?;
        let next_row = r.u32("next_row")?;
        let count = r.u32("count")? as usize;
        r.check_count(count, ROW_FIXED_BYTES, "count")?;
        let mut rows = Vec::with_capacity(count);
        for _ in 0..count {
            let row = r.u32("row")?;
            let len = r.u32("data_len")? as usize;
            rows.push((row, r.bytes(len, "data")?.to_vec()));
        }
        r.finish()?;
        Ok(FragmentRowsConf {
            trans,
            code,
            next_row,
            rows,
        })
    }
}
