//! Where a statement's answer goes as it is produced: an [`AnswerSink`].
//! The protocol layer's sink writes each answer to the client as it
//! comes, so a result set streams: its column definitions first, then
//! its rows, sent whenever [`FLUSH_BYTES`] of them are waiting, however
//! many rows the statement reads. [`Collected`] keeps the answers instead
//! (tests and tools that drive a session without a wire).
//!
//! Invariants:
//! - answers arrive in statement order, each ended by [`AnswerSink::whole`]
//!   or, for a streamed result set, [`AnswerSink::end_rows`]; an error
//!   ends the list;
//! - a streamed result set is [`AnswerSink::columns`], then rows each as
//!   wide as the columns, then its end (or an error in place of the rest
//!   of its rows, which the client reads as the statement's error);
//! - what a sink holds unsent is bounded by the caller flushing once
//!   [`AnswerSink::buffered`] reaches [`FLUSH_BYTES`] ([`ResultStream`]
//!   does, per row).

use crate::handler::SessionStatus;
use crate::outcome::{Column, Outcome, SqlError};
use shoal_types::Value;
use std::future::Future;
use std::pin::Pin;

/// Bytes of encoded rows a sink gathers before they are sent.
pub const FLUSH_BYTES: usize = 64 << 10;

/// The state an answer reports in its OK or EOF packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AnswerEnd {
    /// The session after the statement.
    pub status: SessionStatus,
    /// More answers follow (a multi-statement query).
    pub more: bool,
}

/// A sink's flush: `Err` when the client is gone (the statement should
/// stop; the connection ends after it).
pub type Flushing<'a> = Pin<Box<dyn Future<Output = Result<(), SqlError>> + Send + 'a>>;

/// Where a handler's answers go, in order (see the module's invariants).
pub trait AnswerSink: Send {
    /// A whole answer: an OK, a result set held in full, or an error
    /// (which ends the list, and ends a streamed result set in place of
    /// its remaining rows). A result set is sent as it is written, so
    /// this may wait for the client; `Err` if the client is gone.
    fn whole(&mut self, result: Result<Outcome, SqlError>, end: AnswerEnd) -> Flushing<'_>;

    /// A streamed result set begins with these columns (`now`: the
    /// state its column definitions' EOF reports).
    fn columns(&mut self, columns: &[Column], now: AnswerEnd);

    /// The streamed result set's next row, one value per column. `Err`
    /// if it cannot be encoded for its column (nothing of it was
    /// written); the caller then ends the result set with that error.
    fn row(&mut self, values: &[Value]) -> Result<(), SqlError>;

    /// The streamed result set ended with all its rows.
    fn end_rows(&mut self, end: AnswerEnd);

    /// Bytes written but not yet sent.
    fn buffered(&self) -> usize;

    /// Sends what is buffered.
    fn flush(&mut self) -> Flushing<'_>;

    /// A streamed result set is open: its columns went out, its end not.
    fn streaming(&self) -> bool;
}

/// What an executor streams a result set through: the sink, and the
/// state the column definitions report.
pub struct ResultStream<'s> {
    sink: &'s mut dyn AnswerSink,
    now: AnswerEnd,
    /// Rows written since the columns.
    rows: u64,
}

impl<'s> ResultStream<'s> {
    pub fn new(sink: &'s mut dyn AnswerSink, now: AnswerEnd) -> ResultStream<'s> {
        ResultStream { sink, now, rows: 0 }
    }

    /// The result set's columns (before any row).
    pub fn columns(&mut self, columns: &[Column]) {
        self.sink.columns(columns, self.now);
    }

    /// One row, sent on once enough are gathered.
    pub async fn row(&mut self, values: &[Value]) -> Result<(), SqlError> {
        self.sink.row(values)?;
        self.rows += 1;
        if self.sink.buffered() >= FLUSH_BYTES {
            self.sink.flush().await?;
        }
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Output went out already: the statement cannot be run again.
    pub fn started(&self) -> bool {
        self.sink.streaming()
    }
}

/// A row's values as text (`None`: NULL).
type TextRow = Vec<Option<Vec<u8>>>;

/// A sink that keeps the answers: a streamed result set becomes an
/// [`Outcome::Rows`] of text values, as a buffered one is.
#[derive(Debug, Default)]
pub struct Collected {
    /// The answers so far.
    answers: Vec<Result<Outcome, SqlError>>,
    /// The open streamed result set.
    open: Option<(Vec<Column>, Vec<TextRow>)>,
}

impl Collected {
    pub fn into_answers(self) -> Vec<Result<Outcome, SqlError>> {
        self.answers
    }
}

impl AnswerSink for Collected {
    fn whole(&mut self, result: Result<Outcome, SqlError>, _end: AnswerEnd) -> Flushing<'_> {
        // An error in place of the rest of a result set: the rows that
        // went before are lost to the client, as on the wire.
        self.open = None;
        self.answers.push(result);
        Box::pin(std::future::ready(Ok(())))
    }

    fn columns(&mut self, columns: &[Column], _now: AnswerEnd) {
        self.open = Some((columns.to_vec(), Vec::new()));
    }

    fn row(&mut self, values: &[Value]) -> Result<(), SqlError> {
        if let Some((_, rows)) = &mut self.open {
            rows.push(values.iter().map(crate::sqltypes::text).collect());
        }
        Ok(())
    }

    fn end_rows(&mut self, _end: AnswerEnd) {
        if let Some((columns, rows)) = self.open.take() {
            self.answers.push(Ok(Outcome::Rows { columns, rows }));
        }
    }

    fn buffered(&self) -> usize {
        0
    }

    fn flush(&mut self) -> Flushing<'_> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn streaming(&self) -> bool {
        self.open.is_some()
    }
}
