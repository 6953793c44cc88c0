//! LQH: a request's body — the columns a read asks for, the attributes a
//! write sets — parsed and checked once per operation. Everything after
//! works from the parsed form; a read's answer is encoded straight from
//! the stored row into one buffer.

use super::apply::not_found;
use super::{err, FragEntry, PendingKind};
use shoal_storage::RowId;
use shoal_types::layout::AttrSlice;
use shoal_types::{ErrorCode, RowLayout, ShoalError};
use shoal_wire::signals::ALL_COLUMNS;
use shoal_wire::{KeyOp, OpResult, OpType};

/// The columns a read asks for.
#[derive(Clone, Copy, Debug)]
pub(super) enum ReadList<'a> {
    /// Every column, in column order.
    All,
    /// Column ids, two little-endian bytes each, checked against the table.
    Columns(&'a [u8]),
}

impl<'a> ReadList<'a> {
    /// How many columns the answer holds.
    fn count(self, layout: &RowLayout) -> usize {
        match self {
            ReadList::All => layout.columns().len(),
            ReadList::Columns(ids) => ids.len() / 2,
        }
    }

    pub(super) fn ids(self, layout: &RowLayout) -> ReadIds<'a> {
        match self {
            ReadList::All => ReadIds::All(0..layout.columns().len() as u16),
            ReadList::Columns(ids) => ReadIds::List(ids.chunks_exact(2)),
        }
    }
}

/// The column ids of a [`ReadList`].
pub(super) enum ReadIds<'a> {
    All(std::ops::Range<u16>),
    List(std::slice::ChunksExact<'a, u8>),
}

impl Iterator for ReadIds<'_> {
    type Item = u16;

    #[inline]
    fn next(&mut self) -> Option<u16> {
        match self {
            ReadIds::All(range) => range.next(),
            ReadIds::List(chunks) => chunks.next().map(|c| u16::from_le_bytes([c[0], c[1]])),
        }
    }
}

/// A request's body, checked.
#[derive(Debug)]
pub(super) enum Body<'a> {
    Read(ReadList<'a>),
    /// An insert's, update's or write's attribute list: its structure is
    /// checked here, each value as it is stored (`RowLayout::build_row`,
    /// `update_row`), so no value is looked at twice.
    Write(AttrSlice<'a>),
    Delete,
}

/// Parses and checks the parts of a request that do not depend on the
/// row: a read's column list, a write's attribute list structure.
pub(super) fn parse_body<'a>(layout: &RowLayout, op: &'a KeyOp) -> Result<Body<'a>, ShoalError> {
    match op.op {
        OpType::Read => {
            let list = read_list(op.attrs())?;
            if let ReadList::Columns(ids) = list {
                layout.check_column_ids(ReadList::Columns(ids).ids(layout))?;
            }
            Ok(Body::Read(list))
        }
        OpType::Delete if op.attrs().is_empty() => Ok(Body::Delete),
        OpType::Delete => Err(err(ErrorCode::BadRequest, "a delete carries no attributes")),
        OpType::Insert | OpType::Update | OpType::Write => {
            let (attrs, rest) = AttrSlice::parse(op.attrs())?;
            if rest.is_empty() {
                Ok(Body::Write(attrs))
            } else {
                Err(err(ErrorCode::BadRequest, "bytes after the attribute list"))
            }
        }
    }
}

/// Parses a read's column list: `u16 count` + `count` column ids, or
/// [`ALL_COLUMNS`] alone.
pub(super) fn read_list(bytes: &[u8]) -> Result<ReadList<'_>, ShoalError> {
    if bytes.len() < 2 {
        return Err(err(ErrorCode::BadRequest, "read column list truncated"));
    }
    let count = u16::from_le_bytes([bytes[0], bytes[1]]);
    if count == ALL_COLUMNS {
        return if bytes.len() == 2 {
            Ok(ReadList::All)
        } else {
            Err(err(
                ErrorCode::BadRequest,
                "bytes after an all-columns read list",
            ))
        };
    }
    if bytes.len() != 2 + 2 * count as usize {
        return Err(err(
            ErrorCode::BadRequest,
            "read column list length does not match its count",
        ));
    }
    Ok(ReadList::Columns(&bytes[2..]))
}

/// A read's answer: the asked columns of a row image.
pub(super) fn read_image(layout: &RowLayout, fixed: &[u8], var: &[u8], cols: ReadList) -> OpResult {
    let mut data = Vec::new();
    read_image_into(layout, fixed, var, cols, &mut data);
    OpResult { code: 0, data }
}

/// Appends the asked columns of a row image to `out` (a scan's batch).
pub(super) fn read_image_into(
    layout: &RowLayout,
    fixed: &[u8],
    var: &[u8],
    cols: ReadList,
    out: &mut Vec<u8>,
) {
    match cols {
        ReadList::All => layout.read_all_attrs(fixed, var, out),
        ReadList::Columns(_) => {
            layout.read_attrs(fixed, var, cols.count(layout), cols.ids(layout), out)
        }
    }
}

/// A read by the transaction that has uncommitted changes to the row: it
/// sees its own writes.
pub(super) fn read_own(
    entry: &FragEntry,
    layout: &RowLayout,
    row: RowId,
    cols: ReadList,
) -> Result<OpResult, ShoalError> {
    let (cfixed, cvar) = entry.frag.row(row);
    let Some(pending) = entry.pending.get(&row) else {
        return Err(err(
            ErrorCode::Internal,
            format!("row {row} has no pending change"),
        ));
    };
    match &pending.kind {
        PendingKind::Inserted => Ok(read_image(layout, cfixed, cvar, cols)),
        PendingKind::Updated { fixed, var } => Ok(read_image(
            layout,
            fixed,
            var.as_deref().unwrap_or(cvar),
            cols,
        )),
        PendingKind::Deleted | PendingKind::InsertedThenDeleted => Err(not_found()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::{ColumnDef, ColumnType, TableDef, TableId};
    use shoal_wire::LockMode;

    fn layout() -> RowLayout {
        let def = TableDef::new(
            "t",
            vec![
                ColumnDef::new("k", ColumnType::Int { unsigned: true }),
                ColumnDef::new("a", ColumnType::Int { unsigned: true }),
                ColumnDef::new("b", ColumnType::Int { unsigned: true }),
            ],
            &["k"],
        )
        .unwrap();
        RowLayout::new(&def)
    }

    fn op(op: OpType, attrs: Vec<u8>) -> KeyOp {
        KeyOp::new(
            op,
            LockMode::CommittedRead,
            0,
            TableId(1),
            shoal_types::SchemaVersion(1),
            7u32.to_le_bytes().as_ref(),
            &attrs,
        )
    }

    fn list(ids: &[u16]) -> Vec<u8> {
        let mut out = (ids.len() as u16).to_le_bytes().to_vec();
        for id in ids {
            out.extend_from_slice(&id.to_le_bytes());
        }
        out
    }

    #[test]
    fn a_read_list_is_parsed_once_and_answers_in_its_order() {
        let l = layout();
        let req = op(OpType::Read, list(&[2, 0]));
        let Ok(Body::Read(cols)) = parse_body(&l, &req) else {
            panic!("a read");
        };
        let mut fixed = vec![0u8; 12];
        fixed[..4].copy_from_slice(&7u32.to_le_bytes());
        fixed[8..12].copy_from_slice(&9u32.to_le_bytes());
        let all = ReadList::All;
        assert_eq!(all.count(&l), 3);
        let answer = read_image(&l, &fixed, &[], cols);
        let (attrs, rest) = AttrSlice::parse(&answer.data).unwrap();
        assert!(rest.is_empty());
        let got: Vec<(u16, Option<&[u8]>)> = attrs.iter().collect();
        assert_eq!(
            got,
            [
                (2, Some(&9u32.to_le_bytes()[..])),
                (0, Some(&7u32.to_le_bytes()[..]))
            ]
        );
    }

    #[test]
    fn malformed_bodies_are_refused() {
        let l = layout();
        let bad = [
            op(OpType::Read, vec![1]),
            op(OpType::Read, list(&[5])),
            op(OpType::Read, {
                let mut v = list(&[1]);
                v.push(0);
                v
            }),
            op(OpType::Read, {
                let mut v = ALL_COLUMNS.to_le_bytes().to_vec();
                v.push(0);
                v
            }),
            op(OpType::Delete, vec![0, 0]),
            op(OpType::Update, vec![1, 0, 1, 0]),
            op(OpType::Update, vec![0, 0, 9]),
        ];
        for req in &bad {
            assert!(parse_body(&l, req).is_err(), "{req:?}");
        }
        assert!(matches!(
            parse_body(&l, &op(OpType::Delete, vec![])),
            Ok(Body::Delete)
        ));
        assert!(matches!(
            parse_body(&l, &op(OpType::Insert, vec![0, 0])),
            Ok(Body::Write(_))
        ));
    }
}
