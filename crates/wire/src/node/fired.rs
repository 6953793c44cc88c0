//! What a write did to its table's unique indexes (NDB's fired triggers):
//! the primary replica compares the row's unique keys before and after the
//! write, and the changes travel down the replica chain and back to TC,
//! which deletes the old entries and inserts the new ones in the same
//! transaction.
//!
//! Encoding: the base row's primary key (`u16` length, bytes), then per
//! changed index its hidden table's id (`u32`), a flags byte (bit 0: an
//! old key follows, bit 1: a new key follows) and each key (`u16` length,
//! bytes). Inside a node signal the whole is a `u32` length and the bytes,
//! present only when a flag of the signal says so.

use crate::frame::WireError;
use crate::signals::{put_u16, put_u32, Reader};
use shoal_types::schema::{KEY_BYTES_MAX, UNIQUE_INDEXES_MAX};
use shoal_types::TableId;

/// One unique index's change: the entry to delete, the entry to insert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FiredChange<'a> {
    /// The index's hidden table.
    pub index_table: TableId,
    pub old: Option<&'a [u8]>,
    pub new: Option<&'a [u8]>,
}

/// Writes the changes of one write (the caller skips indexes whose key
/// did not change). Nothing is written when `changes` is empty.
pub fn encode_fired(base_key: &[u8], changes: &[FiredChange<'_>], out: &mut Vec<u8>) {
    if changes.is_empty() {
        return;
    }
    put_u16(out, base_key.len() as u16);
    out.extend_from_slice(base_key);
    for c in changes {
        put_u32(out, c.index_table.0);
        out.push(u8::from(c.old.is_some()) | (u8::from(c.new.is_some()) << 1));
        for key in [c.old, c.new].into_iter().flatten() {
            put_u16(out, key.len() as u16);
            out.extend_from_slice(key);
        }
    }
}

/// Reads what [`encode_fired`] wrote: the base row's key and the changes.
/// Malformed bytes (from a broken or hostile peer) are an error, never a
/// panic.
pub fn decode_fired(bytes: &[u8]) -> Result<(&[u8], Vec<FiredChange<'_>>), WireError> {
    let mut r = Reader::new(bytes, "fired index changes");
    let key = read_key(&mut r, "base_key")?;
    let mut changes = Vec::new();
    while r.remaining() > 0 {
        if changes.len() == UNIQUE_INDEXES_MAX {
            return Err(r.malformed_at(
                r.pos,
                format_args!("more than {UNIQUE_INDEXES_MAX} index changes"),
            ));
        }
        let index_table = TableId(r.u32("index_table")?);
        let at = r.pos;
        let flags = r.u8("flags")?;
        if flags & !0b11 != 0 || flags == 0 {
            return Err(r.malformed_at(at, format_args!("change flags {flags:#x}")));
        }
        let old = if flags & 1 != 0 {
            Some(read_key(&mut r, "old")?)
        } else {
            None
        };
        let new = if flags & 2 != 0 {
            Some(read_key(&mut r, "new")?)
        } else {
            None
        };
        changes.push(FiredChange {
            index_table,
            old,
            new,
        });
    }
    Ok((key, changes))
}

fn read_key<'a>(r: &mut Reader<'a>, field: &'static str) -> Result<&'a [u8], WireError> {
    let at = r.pos;
    let len = usize::from(r.u16(field)?);
    if len > KEY_BYTES_MAX {
        return Err(r.malformed_at(at, format_args!("{field} key of {len} bytes")));
    }
    r.bytes(len, field)
}

/// Bytes `fired` takes inside a node signal.
pub(crate) fn fired_len(fired: &[u8]) -> usize {
    if fired.is_empty() {
        0
    } else {
        4 + fired.len()
    }
}

pub(crate) fn put_fired(out: &mut Vec<u8>, fired: &[u8]) {
    if !fired.is_empty() {
        put_u32(out, fired.len() as u32);
        out.extend_from_slice(fired);
    }
}

pub(crate) fn read_fired(r: &mut Reader<'_>, present: bool) -> Result<Box<[u8]>, WireError> {
    if !present {
        return Ok(Box::default());
    }
    let at = r.pos;
    let len = r.u32("fired_len")? as usize;
    if len == 0 {
        return Err(r.malformed_at(at, format_args!("fired changes flagged but empty")));
    }
    Ok(r.bytes(len, "fired")?.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_round_trip_and_malformed_ones_are_refused() {
        let changes = vec![
            FiredChange {
                index_table: TableId(9),
                old: Some(&[1, 2][..]),
                new: None,
            },
            FiredChange {
                index_table: TableId(10),
                old: Some(&[3][..]),
                new: Some(&[4, 5, 6][..]),
            },
        ];
        let mut out = Vec::new();
        encode_fired(&[7, 7], &changes, &mut out);
        let (key, back) = decode_fired(&out).unwrap();
        assert_eq!(key, &[7, 7]);
        assert_eq!(back, changes);
        for cut in 0..out.len() {
            // Every prefix either decodes to fewer changes or is refused.
            if let Ok((_, some)) = decode_fired(&out[..cut]) {
                assert!(some.len() < changes.len());
            }
        }
        let mut bad = out.clone();
        bad[2 + 2 + 4] = 0; // a change with neither key
        assert!(decode_fired(&bad).is_err());
        let mut empty = Vec::new();
        encode_fired(&[1], &[], &mut empty);
        assert!(empty.is_empty());
    }
}
