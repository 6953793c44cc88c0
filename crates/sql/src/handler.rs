//! The interface between the protocol layer and SQL execution: a
//! [`Handler`] per client connection, made by a [`HandlerFactory`] once
//! the client authenticated.

use crate::answer::{AnswerEnd, AnswerSink};
use crate::outcome::{Column, Outcome, SqlError};
use std::future::Future;
use std::sync::Arc;

/// A `COM_STMT_EXECUTE`: the prepared statement's text and its
/// parameters, each as the SQL literal that reads back as the value the
/// client bound.
#[derive(Clone, Debug)]
pub struct Execution {
    /// The prepared text, `?` marking the parameters.
    pub template: Arc<str>,
    /// The text around the placeholders: one more part than parameters.
    pub parts: Arc<[String]>,
    /// One literal per parameter, in order.
    pub literals: Vec<String>,
}

impl Execution {
    /// The statement with its literals spliced in.
    pub fn spliced(&self) -> String {
        let mut sql = String::with_capacity(
            self.parts.iter().map(String::len).sum::<usize>()
                + self.literals.iter().map(String::len).sum::<usize>(),
        );
        for (i, part) in self.parts.iter().enumerate() {
            sql.push_str(part);
            if let Some(literal) = self.literals.get(i) {
                sql.push_str(literal);
            }
        }
        sql
    }
}

/// What an OK packet's status flags report of a connection's session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionStatus {
    /// A transaction is open (`SERVER_STATUS_IN_TRANS`).
    pub in_transaction: bool,
    /// Autocommit is on (`SERVER_STATUS_AUTOCOMMIT`).
    pub autocommit: bool,
}

/// One client connection's SQL: its session state and statements.
pub trait Handler: Send + 'static {
    /// Runs `sql`, one or more statements separated by `;` (multi-statements),
    /// writing each statement's answer to `sink` as it comes (a result
    /// set's rows as they are read). Execution stops after the first error
    /// (the last answer), as MySQL does. No answer at all is MySQL's
    /// "Query was empty".
    fn query(&mut self, sql: &str, sink: &mut dyn AnswerSink) -> impl Future<Output = ()> + Send;

    /// `COM_INIT_DB`, and the database named in the handshake.
    fn use_database(&mut self, database: &str)
        -> impl Future<Output = Result<(), SqlError>> + Send;

    /// The session's state for the status flags of the next OK or EOF.
    fn status(&self) -> SessionStatus;

    /// The connection closed (`COM_QUIT`, or it broke): roll back an open
    /// transaction, so nothing stays locked.
    fn close(&mut self) -> impl Future<Output = ()> + Send;

    /// `COM_STMT_PREPARE`: checks one statement whose `?` are parameters
    /// and answers the columns of the result set it will return (empty if
    /// it returns none), as MySQL answers them before any execution. An
    /// error (unknown table, syntax) is the prepare's answer.
    ///
    /// The default knows nothing and accepts everything, so no columns are
    /// announced. Connector/Python copes, but libmariadb (sysbench, the
    /// mariadb tools) does not: after executing a statement that announced
    /// no columns yet returned rows, its next command fails with 2014
    /// "Commands out of sync". An execution must return as many columns as
    /// its prepare announced (libmariadb: 2057 otherwise).
    fn prepare(&mut self, sql: &str) -> impl Future<Output = Result<Vec<Column>, SqlError>> + Send {
        let _ = sql;
        std::future::ready(Ok(Vec::new()))
    }

    /// `COM_STMT_EXECUTE` of a statement prepared before. The default runs
    /// the text with the literals spliced in, as a query; a handler may
    /// keep the statement parsed instead (the result must be the same).
    fn execute(
        &mut self,
        execution: &Execution,
        sink: &mut dyn AnswerSink,
    ) -> impl Future<Output = ()> + Send {
        let sql = execution.spliced();
        async move { self.query(&sql, sink).await }
    }
}

/// Writes answers that were held whole to `sink`, up to the first error
/// (or until the client is gone), each reporting `status` (handlers that
/// do not track it per statement).
pub async fn answer_all(
    sink: &mut dyn AnswerSink,
    results: Vec<Result<Outcome, SqlError>>,
    status: SessionStatus,
) {
    let count = results.len();
    for (i, result) in results.into_iter().enumerate() {
        let failed = result.is_err();
        let more = i + 1 < count && !failed;
        if sink
            .whole(result, AnswerEnd { status, more })
            .await
            .is_err()
            || failed
        {
            break;
        }
    }
}

/// Makes a connection's [`Handler`] once its client authenticated.
pub trait HandlerFactory: Send + Sync + 'static {
    type Handler: Handler;

    /// A handler for `user`, connected from `peer`.
    fn handler(&self, user: &str, peer: std::net::SocketAddr) -> Self::Handler;
}
