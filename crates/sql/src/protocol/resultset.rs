//! Answers on the wire: OK, ERR and EOF packets, column definitions, text
//! and binary rows, and the sequence of them a statement list answers.
//!
//! Invariants:
//! - a result set held whole is checked whole (every row as wide as its
//!   columns, every binary value valid for its column's type) before its
//!   first byte is written; a streamed one ([`super::answers`]) row by
//!   row, a row that cannot be encoded ending it with an ERR in place of
//!   the rest, which clients read as the statement's error. Either way an
//!   executor bug never desynchronises the client;
//! - with `CLIENT_DEPRECATE_EOF` there is no EOF after the column
//!   definitions and the rows end with an OK packet whose header is 0xFE;
//!   without it, an EOF packet follows each of the two parts;
//! - every answer but the last of a multi-statement query carries
//!   `SERVER_MORE_RESULTS_EXISTS`, and an error ends the list.

use mysql_common::constants::{ColumnFlags, ColumnType, StatusFlags};
use tokio::io::{AsyncRead, AsyncWrite};

use super::binary;
use super::errors;
use super::packet::{PacketError, PacketIo};
use super::wire::{put_lenenc_bytes, put_lenenc_int, put_u16, put_u32};
use crate::handler::SessionStatus;
use crate::outcome::{Column, ColumnKind, SqlError};

/// `utf8mb4_bin`: Shoal compares strings in binary, and says so.
pub(crate) const COLLATION_UTF8MB4_BIN: u16 = 46;
/// `binary`: byte strings and numbers.
pub(crate) const COLLATION_BINARY: u16 = 63;

const OK_HEADER: u8 = 0x00;
const EOF_HEADER: u8 = 0xFE;
const ERR_HEADER: u8 = 0xFF;

/// How a connection wants its answers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AnswerStyle {
    /// The client set `CLIENT_DEPRECATE_EOF`.
    pub(crate) deprecate_eof: bool,
    /// Rows in the binary protocol (a prepared statement's execution).
    pub(crate) binary: bool,
}

/// The status flags of an OK or EOF packet.
pub(crate) fn status_flags(session: SessionStatus, more_results: bool) -> StatusFlags {
    let mut flags = StatusFlags::empty();
    flags.set(StatusFlags::SERVER_STATUS_IN_TRANS, session.in_transaction);
    flags.set(StatusFlags::SERVER_STATUS_AUTOCOMMIT, session.autocommit);
    flags.set(StatusFlags::SERVER_MORE_RESULTS_EXISTS, more_results);
    flags
}

/// An OK packet (header 0x00), or with `header` 0xFE the OK that ends a
/// result set under `CLIENT_DEPRECATE_EOF`. The info, if any, is a
/// length-encoded string: the protocol documentation says "the rest of
/// the packet" without `CLIENT_SESSION_TRACK`, but MySQL and MariaDB
/// servers send it length-encoded and libmariadb rejects anything else
/// ("Received malformed packet").
pub(crate) fn ok_packet(
    header: u8,
    affected_rows: u64,
    last_insert_id: u64,
    status: StatusFlags,
    warnings: u16,
    info: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(11 + info.len());
    out.push(header);
    put_lenenc_int(&mut out, affected_rows);
    put_lenenc_int(&mut out, last_insert_id);
    put_u16(&mut out, status.bits());
    put_u16(&mut out, warnings);
    if !info.is_empty() {
        put_lenenc_bytes(&mut out, info.as_bytes());
    }
    out
}

/// A plain OK with nothing to report.
pub(crate) fn ok_empty(status: StatusFlags) -> Vec<u8> {
    ok_packet(OK_HEADER, 0, 0, status, 0, "")
}

/// An ERR packet. Before the client's handshake response says it speaks
/// protocol 4.1, the SQLSTATE is left out (an older client would print
/// the `#HY000` as part of the message).
pub(crate) fn err_packet(error: &SqlError, protocol_41: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + error.message.len());
    out.push(ERR_HEADER);
    put_u16(&mut out, error.code);
    if protocol_41 {
        out.push(b'#');
        out.extend_from_slice(&error.sqlstate);
    }
    out.extend_from_slice(error.message.as_bytes());
    out
}

/// An EOF packet (pre-`CLIENT_DEPRECATE_EOF` clients).
pub(crate) fn eof_packet(warnings: u16, status: StatusFlags) -> Vec<u8> {
    let mut out = Vec::with_capacity(5);
    out.push(EOF_HEADER);
    put_u16(&mut out, warnings);
    put_u16(&mut out, status.bits());
    out
}

/// The end of a list of column definitions or rows: an EOF packet, or
/// the 0xFE-headed OK that replaces it.
pub(crate) fn end_of_rows(style: AnswerStyle, status: StatusFlags) -> Vec<u8> {
    if style.deprecate_eof {
        ok_packet(EOF_HEADER, 0, 0, status, 0, "")
    } else {
        eof_packet(0, status)
    }
}

pub(crate) fn column_type(kind: ColumnKind) -> ColumnType {
    match kind {
        ColumnKind::Tiny => ColumnType::MYSQL_TYPE_TINY,
        ColumnKind::Short => ColumnType::MYSQL_TYPE_SHORT,
        ColumnKind::Long => ColumnType::MYSQL_TYPE_LONG,
        ColumnKind::LongLong => ColumnType::MYSQL_TYPE_LONGLONG,
        ColumnKind::Float => ColumnType::MYSQL_TYPE_FLOAT,
        ColumnKind::Double => ColumnType::MYSQL_TYPE_DOUBLE,
        ColumnKind::VarString => ColumnType::MYSQL_TYPE_VAR_STRING,
        ColumnKind::String => ColumnType::MYSQL_TYPE_STRING,
        ColumnKind::Timestamp => ColumnType::MYSQL_TYPE_TIMESTAMP,
        ColumnKind::DateTime => ColumnType::MYSQL_TYPE_DATETIME,
        ColumnKind::Date => ColumnType::MYSQL_TYPE_DATE,
        ColumnKind::Time => ColumnType::MYSQL_TYPE_TIME,
        ColumnKind::NewDecimal => ColumnType::MYSQL_TYPE_NEWDECIMAL,
        ColumnKind::Null => ColumnType::MYSQL_TYPE_NULL,
    }
}

fn is_numeric(kind: ColumnKind) -> bool {
    matches!(
        kind,
        ColumnKind::Tiny
            | ColumnKind::Short
            | ColumnKind::Long
            | ColumnKind::LongLong
            | ColumnKind::Float
            | ColumnKind::Double
            | ColumnKind::NewDecimal
    )
}

/// A `Protocol::ColumnDefinition41`.
pub(crate) fn column_definition(column: &Column) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + column.name.len() * 2 + column.table.len() * 2);
    put_lenenc_bytes(&mut out, b"def");
    put_lenenc_bytes(&mut out, column.schema.as_bytes());
    // Shoal has no separate original names yet: the alias stands for both.
    put_lenenc_bytes(&mut out, column.table.as_bytes());
    put_lenenc_bytes(&mut out, column.table.as_bytes());
    put_lenenc_bytes(&mut out, column.name.as_bytes());
    put_lenenc_bytes(&mut out, column.name.as_bytes());
    put_lenenc_int(&mut out, 0x0C);
    let collation = if column.binary {
        COLLATION_BINARY
    } else {
        COLLATION_UTF8MB4_BIN
    };
    put_u16(&mut out, collation);
    put_u32(&mut out, column.length);
    out.push(column_type(column.kind) as u8);
    let mut flags = ColumnFlags::empty();
    flags.set(ColumnFlags::NOT_NULL_FLAG, !column.nullable);
    flags.set(ColumnFlags::PRI_KEY_FLAG, column.primary_key);
    flags.set(ColumnFlags::UNSIGNED_FLAG, column.unsigned);
    flags.set(ColumnFlags::BINARY_FLAG, column.binary);
    flags.set(ColumnFlags::NUM_FLAG, is_numeric(column.kind));
    put_u16(&mut out, flags.bits());
    out.push(column.decimals);
    put_u16(&mut out, 0);
    out
}

/// A text-protocol row: each value a length-encoded string, NULL as 0xFB.
pub(crate) fn text_row(out: &mut Vec<u8>, row: &[Option<Vec<u8>>]) {
    for value in row {
        match value {
            Some(bytes) => put_lenenc_bytes(out, bytes),
            None => out.push(0xFB),
        }
    }
}

/// A binary-protocol row: header 0x00, a NULL bitmap offset by two bits,
/// then each non-NULL value in its column type's binary form.
pub(crate) fn binary_row(
    out: &mut Vec<u8>,
    columns: &[Column],
    row: &[Option<Vec<u8>>],
) -> Result<(), SqlError> {
    out.push(OK_HEADER);
    let bitmap_at = out.len();
    out.resize(bitmap_at + (columns.len() + 7 + 2) / 8, 0);
    for (i, (column, value)) in columns.iter().zip(row).enumerate() {
        match value {
            None => {
                let bit = i + 2;
                if let Some(byte) = out.get_mut(bitmap_at + bit / 8) {
                    *byte |= 1 << (bit % 8);
                }
            }
            Some(text) => binary::encode_value(out, column, text)?,
        }
    }
    Ok(())
}

/// Checks that `rows` can be sent under `columns`.
fn check_result_set(columns: &[Column], rows: &[Vec<Option<Vec<u8>>>]) -> Result<(), SqlError> {
    if columns.is_empty() {
        return Err(errors::internal("a result set without columns"));
    }
    if let Some((i, row)) = rows
        .iter()
        .enumerate()
        .find(|(_, r)| r.len() != columns.len())
    {
        return Err(errors::internal(format!(
            "row {i} has {} values for {} columns",
            row.len(),
            columns.len()
        )));
    }
    Ok(())
}

/// Sends one result set held whole, writing as it goes (every
/// `FLUSH_BYTES`); `false` if it could not be encoded and an ERR went in
/// its place (which ends the answer list).
pub(crate) async fn send_result_set<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    columns: &[Column],
    rows: &[Vec<Option<Vec<u8>>>],
    status: StatusFlags,
    style: AnswerStyle,
) -> Result<bool, PacketError> {
    // Everything is checked, and binary rows encoded, before anything is
    // written: a row that cannot go out must become an ERR, not half a
    // result.
    let checked = check_result_set(columns, rows).and_then(|()| {
        if !style.binary {
            return Ok(None);
        }
        let mut encoded = Vec::with_capacity(rows.len());
        for row in rows {
            let mut out = Vec::new();
            binary_row(&mut out, columns, row)?;
            encoded.push(out);
        }
        Ok(Some(encoded))
    });
    let encoded = match checked {
        Ok(encoded) => encoded,
        Err(error) => {
            tracing::warn!(%error, "a result set could not be encoded");
            io.push(&err_packet(&error, true));
            return Ok(false);
        }
    };
    push_columns(io, columns, status, style);
    match encoded {
        Some(encoded) => {
            for row in &encoded {
                io.send(row).await?;
            }
        }
        None => {
            let mut out = Vec::new();
            for row in rows {
                out.clear();
                text_row(&mut out, row);
                io.send(&out).await?;
            }
        }
    }
    io.push(&end_of_rows(style, status));
    Ok(true)
}

/// A result set's head: the column count, the column definitions, and
/// (without `CLIENT_DEPRECATE_EOF`) the EOF after them.
pub(crate) fn push_columns<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    columns: &[Column],
    status: StatusFlags,
    style: AnswerStyle,
) {
    let mut count = Vec::with_capacity(9);
    put_lenenc_int(&mut count, columns.len() as u64);
    io.push(&count);
    for column in columns {
        io.push(&column_definition(column));
    }
    if !style.deprecate_eof {
        io.push(&eof_packet(0, status));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(name: &str, kind: ColumnKind) -> Column {
        Column {
            name: name.to_string(),
            table: "t".to_string(),
            schema: "db".to_string(),
            kind,
            length: 11,
            decimals: 0,
            nullable: false,
            unsigned: true,
            binary: true,
            primary_key: true,
        }
    }

    #[test]
    fn ok_packet_bytes() {
        let status = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        assert_eq!(
            ok_packet(OK_HEADER, 1, 300, status, 2, "hi"),
            [0x00, 1, 0xFC, 0x2C, 0x01, 2, 0, 2, 0, 2, b'h', b'i']
        );
    }

    #[test]
    fn err_packet_bytes() {
        let error = SqlError::new(1045, "28000", "no");
        assert_eq!(
            err_packet(&error, true),
            [0xFF, 0x15, 0x04, b'#', b'2', b'8', b'0', b'0', b'0', b'n', b'o']
        );
        assert_eq!(err_packet(&error, false), [0xFF, 0x15, 0x04, b'n', b'o']);
    }

    #[test]
    fn column_definition_bytes() {
        let bytes = column_definition(&column("id", ColumnKind::Long));
        let mut expected = vec![
            3, b'd', b'e', b'f', 2, b'd', b'b', 1, b't', 1, b't', 2, b'i', b'd',
        ];
        expected.extend([2, b'i', b'd', 0x0C, 63, 0, 11, 0, 0, 0, 3]);
        // NOT_NULL | PRI_KEY | UNSIGNED | BINARY | NUM
        expected.extend((1u16 | 2 | 32 | 128 | 32768).to_le_bytes());
        expected.extend([0, 0, 0]);
        assert_eq!(bytes, expected);
    }

    #[test]
    fn binary_row_null_bitmap_is_offset_by_two() {
        let columns = vec![column("a", ColumnKind::Long); 7];
        let mut row: Vec<Option<Vec<u8>>> = vec![Some(b"1".to_vec()); 7];
        row[0] = None;
        row[6] = None;
        let mut out = Vec::new();
        binary_row(&mut out, &columns, &row).expect("encodes");
        // Column 0 is bit 2 of byte 0; column 6 is bit 0 of byte 1.
        assert_eq!(&out[..3], &[0x00, 0b0000_0100, 0b0000_0001]);
        assert_eq!(out.len(), 3 + 5 * 4);
    }

    #[test]
    fn a_row_of_the_wrong_width_is_refused() {
        let columns = vec![column("a", ColumnKind::Long)];
        let rows = vec![vec![Some(b"1".to_vec()), None]];
        assert_eq!(
            check_result_set(&columns, &rows).map_err(|e| e.code),
            Err(1105)
        );
        assert_eq!(check_result_set(&[], &[]).map_err(|e| e.code), Err(1105));
    }
}
