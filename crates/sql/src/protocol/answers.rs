//! The [`AnswerSink`] of a connection: each answer is framed into the
//! connection's output as the handler produces it, and a streamed result
//! set's rows go out whenever the executor flushes them, so a result
//! larger than the SQL node's memory passes through it.
//!
//! Invariants:
//! - after an error (the statement's, or an answer that could not be
//!   encoded) the list is over: later answers are dropped, as the client
//!   reads nothing after an ERR;
//! - a result set held whole is written as it is framed, every
//!   [`crate::answer::FLUSH_BYTES`], as a streamed one is: the sink never
//!   holds a second copy of it;
//! - a write that fails marks the connection broken: every later flush
//!   and answer fails at once (the executor stops its statement, the
//!   session its statement list), and [`WireSink::finish`] returns the
//!   failure so the command loop ends the connection;
//! - a command that answered nothing gets MySQL's "Query was empty", and
//!   a streamed result set the handler left open is ended with an ERR, so
//!   the client never waits for a packet that is not coming.

use tokio::io::{AsyncRead, AsyncWrite};

use super::binary;
use super::errors;
use super::packet::{PacketError, PacketIo};
use super::resultset::{
    end_of_rows, err_packet, ok_packet, push_columns, send_result_set, status_flags, AnswerStyle,
};
use super::wire::put_lenenc_bytes;
use crate::answer::{AnswerEnd, AnswerSink, Flushing};
use crate::outcome::{Column, Outcome, SqlError};
use shoal_types::Value;

/// One command's answers, written to its connection.
pub(crate) struct WireSink<'a, S> {
    io: &'a mut PacketIo<S>,
    style: AnswerStyle,
    /// The open streamed result set's columns.
    open: Option<Vec<Column>>,
    /// Something was answered.
    answered: bool,
    /// An ERR went out: the list is over.
    ended: bool,
    /// The write that failed.
    broken: Option<PacketError>,
    /// One row's encoding, reused.
    scratch: Vec<u8>,
}

impl<'a, S: AsyncRead + AsyncWrite + Unpin + Send> WireSink<'a, S> {
    pub(crate) fn new(io: &'a mut PacketIo<S>, style: AnswerStyle) -> WireSink<'a, S> {
        WireSink {
            io,
            style,
            open: None,
            answered: false,
            ended: false,
            broken: None,
            scratch: Vec::new(),
        }
    }

    fn fail(&mut self, error: &SqlError) {
        self.open = None;
        self.ended = true;
        self.answered = true;
        self.io.push(&err_packet(error, true));
    }

    /// Ends the command's answers (see the module's invariants) and
    /// sends what is left.
    pub(crate) async fn finish(mut self) -> Result<(), PacketError> {
        if let Some(broken) = self.broken.take() {
            return Err(broken);
        }
        if self.open.is_some() {
            let error = errors::internal("a result set was left without its end");
            tracing::warn!(%error, "ending the answer");
            self.fail(&error);
        }
        if !self.answered {
            self.fail(&errors::empty_query());
        }
        self.io.flush().await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> AnswerSink for WireSink<'_, S> {
    fn whole(&mut self, result: Result<Outcome, SqlError>, end: AnswerEnd) -> Flushing<'_> {
        Box::pin(async move {
            if let Some(error) = &self.broken {
                return Err(errors::client_gone(error));
            }
            if self.ended {
                tracing::warn!("the executor answered more after an error; it is dropped");
                return Ok(());
            }
            let status = status_flags(end.status, end.more);
            match result {
                Err(error) => self.fail(&error),
                Ok(_) if self.open.is_some() => {
                    self.fail(&errors::internal("an answer inside an open result set"));
                }
                Ok(Outcome::Ok {
                    affected_rows,
                    last_insert_id,
                    warnings,
                    info,
                }) => {
                    self.answered = true;
                    let ok =
                        ok_packet(0x00, affected_rows, last_insert_id, status, warnings, &info);
                    self.io.push(&ok);
                }
                Ok(Outcome::Rows { columns, rows }) => {
                    self.answered = true;
                    let sent = send_result_set(self.io, &columns, &rows, status, self.style).await;
                    match sent {
                        Ok(true) => {}
                        Ok(false) => self.ended = true,
                        Err(error) => {
                            let gone = errors::client_gone(&error);
                            self.broken = Some(error);
                            return Err(gone);
                        }
                    }
                }
                Ok(Outcome::Streamed) => {
                    self.fail(&errors::internal("a streamed result set that never began"));
                }
            }
            Ok(())
        })
    }

    fn columns(&mut self, columns: &[Column], now: AnswerEnd) {
        if self.ended {
            return;
        }
        if self.open.is_some() {
            self.fail(&errors::internal("a result set inside a result set"));
            return;
        }
        if columns.is_empty() {
            self.fail(&errors::internal("a result set without columns"));
            return;
        }
        self.answered = true;
        let status = status_flags(now.status, now.more);
        push_columns(self.io, columns, status, self.style);
        self.open = Some(columns.to_vec());
    }

    fn row(&mut self, values: &[Value]) -> Result<(), SqlError> {
        let Some(columns) = &self.open else {
            return Err(errors::internal("a row outside a result set"));
        };
        if values.len() != columns.len() {
            return Err(errors::internal(format!(
                "a row of {} values for {} columns",
                values.len(),
                columns.len()
            )));
        }
        self.scratch.clear();
        if self.style.binary {
            binary_row(&mut self.scratch, columns, values)?;
        } else {
            text_row(&mut self.scratch, values);
        }
        self.io.push(&self.scratch);
        Ok(())
    }

    fn end_rows(&mut self, end: AnswerEnd) {
        if self.ended {
            return;
        }
        if self.open.take().is_none() {
            self.fail(&errors::internal(
                "the end of a result set that never began",
            ));
            return;
        }
        let status = status_flags(end.status, end.more);
        self.io.push(&end_of_rows(self.style, status));
    }

    fn buffered(&self) -> usize {
        self.io.buffered()
    }

    fn flush(&mut self) -> Flushing<'_> {
        Box::pin(async move {
            if self.broken.is_none() {
                if let Err(error) = self.io.flush().await {
                    self.broken = Some(error);
                }
            }
            match &self.broken {
                None => Ok(()),
                Some(error) => Err(errors::client_gone(error)),
            }
        })
    }

    fn streaming(&self) -> bool {
        self.open.is_some()
    }
}

/// A text-protocol row of values: each a length-encoded string, NULL as
/// 0xFB. Strings and integers are written where they lie.
fn text_row(out: &mut Vec<u8>, values: &[Value]) {
    for value in values {
        match value {
            Value::Null => out.push(0xFB),
            Value::Str(s) => put_lenenc_bytes(out, s.as_bytes()),
            Value::Bytes(b) => put_lenenc_bytes(out, b),
            Value::Int(i) => put_lenenc_bytes(out, itoa(&mut [0; 20], i.unsigned_abs(), *i < 0)),
            Value::UInt(u) => put_lenenc_bytes(out, itoa(&mut [0; 20], *u, false)),
            other => put_lenenc_bytes(out, &crate::sqltypes::text(other).unwrap_or_default()),
        }
    }
}

/// The decimal digits of `n` (after a '-' if `negative`), in `buf`.
fn itoa(buf: &mut [u8; 20], mut n: u64, negative: bool) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if negative {
        // u64::MAX has 20 digits, but a negative i64 has at most 19.
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

/// A binary-protocol row of values: header 0x00, the NULL bitmap offset
/// by two bits, then each non-NULL value in its column type's form.
fn binary_row(out: &mut Vec<u8>, columns: &[Column], values: &[Value]) -> Result<(), SqlError> {
    out.push(0x00);
    let bitmap_at = out.len();
    out.resize(bitmap_at + (columns.len() + 7 + 2) / 8, 0);
    for (i, (column, value)) in columns.iter().zip(values).enumerate() {
        if value.is_null() {
            let bit = i + 2;
            if let Some(byte) = out.get_mut(bitmap_at + bit / 8) {
                *byte |= 1 << (bit % 8);
            }
        } else {
            binary::encode_typed(out, column, value)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_as_their_text() {
        for i in [0i64, 7, -7, 10, -10, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            text_row(&mut out, &[Value::Int(i)]);
            assert_eq!(&out[1..], i.to_string().as_bytes());
        }
        for u in [0u64, 9, 10, u64::MAX] {
            let mut out = Vec::new();
            text_row(&mut out, &[Value::UInt(u)]);
            assert_eq!(&out[1..], u.to_string().as_bytes());
        }
    }

    #[test]
    fn text_rows_match_the_text_of_each_value() {
        let values = [
            Value::Null,
            Value::Str("héllo".into()),
            Value::Bytes(vec![0, 255]),
            Value::Double(2.5),
            Value::Date(0),
        ];
        let mut out = Vec::new();
        text_row(&mut out, &values);
        let texts: Vec<Option<Vec<u8>>> = values.iter().map(crate::sqltypes::text).collect();
        let mut expected = Vec::new();
        super::super::resultset::text_row(&mut expected, &texts);
        assert_eq!(out, expected);
    }
}
