//! The command phase of one logged-in connection: reads each command
//! packet, runs it (statements through the [`Handler`]), and answers.
//!
//! Invariants:
//! - every command gets exactly the answer MySQL gives it (none for
//!   `COM_QUIT`, `COM_STMT_CLOSE` and `COM_STMT_SEND_LONG_DATA`), so the
//!   client never waits for a packet that is not coming;
//! - a command whose packet does not parse is answered with an ERR and
//!   ends the connection: after garbage, nothing the client sends next
//!   can be trusted to be framed as it thinks;
//! - a well-formed request that fails (an SQL error, an unknown
//!   statement id) is answered with an ERR and the connection goes on.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use mysql_common::constants::{CapabilityFlags, Command};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use super::answers::WireSink;
use super::errors;
use super::handshake::Login;
use super::packet::{PacketError, PacketIo};
use super::prepared::{BindError, Statements};
use super::resultset::{
    column_definition, end_of_rows, eof_packet, err_packet, ok_empty, status_flags, AnswerStyle,
};
use super::server::Shared;
use super::sql_scan;
use super::wire::{put_u16, put_u32, Malformed, Reader};
use crate::handler::{Handler, HandlerFactory};
use crate::outcome::{Column, ColumnKind, SqlError};

const COM_QUIT: u8 = Command::COM_QUIT as u8;
const COM_INIT_DB: u8 = Command::COM_INIT_DB as u8;
const COM_QUERY: u8 = Command::COM_QUERY as u8;
const COM_FIELD_LIST: u8 = Command::COM_FIELD_LIST as u8;
const COM_STATISTICS: u8 = Command::COM_STATISTICS as u8;
const COM_PING: u8 = Command::COM_PING as u8;
const COM_STMT_PREPARE: u8 = Command::COM_STMT_PREPARE as u8;
const COM_STMT_EXECUTE: u8 = Command::COM_STMT_EXECUTE as u8;
const COM_STMT_SEND_LONG_DATA: u8 = Command::COM_STMT_SEND_LONG_DATA as u8;
const COM_STMT_CLOSE: u8 = Command::COM_STMT_CLOSE as u8;
const COM_STMT_RESET: u8 = Command::COM_STMT_RESET as u8;
const COM_SET_OPTION: u8 = Command::COM_SET_OPTION as u8;
const COM_STMT_FETCH: u8 = Command::COM_STMT_FETCH as u8;
const COM_RESET_CONNECTION: u8 = Command::COM_RESET_CONNECTION as u8;
const COM_STMT_BULK_EXECUTE: u8 = Command::COM_STMT_BULK_EXECUTE as u8;

/// Why a session ended.
#[derive(Debug)]
pub(crate) enum SessionEnd {
    /// `COM_QUIT`.
    Quit,
    /// The server is stopping.
    Shutdown,
    /// The database named at login could not be opened (answered).
    Refused(SqlError),
    /// A command that does not parse (answered).
    Malformed(SqlError),
    /// The connection broke, timed out, or broke the framing rules.
    Packet(PacketError),
}

impl std::fmt::Display for SessionEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionEnd::Quit => f.write_str("the client quit"),
            SessionEnd::Shutdown => f.write_str("server shutdown"),
            SessionEnd::Refused(error) => write!(f, "refused: {error}"),
            SessionEnd::Malformed(error) => write!(f, "{error}"),
            SessionEnd::Packet(error) => write!(f, "{error}"),
        }
    }
}

/// What the loop does after a command.
enum Flow {
    Continue,
    End(SessionEnd),
}

/// One logged-in connection.
pub(crate) struct Session<S, F: HandlerFactory> {
    io: PacketIo<S>,
    handler: F::Handler,
    shared: Arc<Shared<F>>,
    user: String,
    peer: SocketAddr,
    /// The database from the handshake or the last `COM_INIT_DB`, opened
    /// again after `COM_RESET_CONNECTION`.
    database: Option<String>,
    capabilities: CapabilityFlags,
    /// Multi-statements, as the handshake or `COM_SET_OPTION` last set them.
    multi_statements: bool,
    statements: Statements,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send, F: HandlerFactory> Session<S, F> {
    pub(crate) fn new(
        io: PacketIo<S>,
        handler: F::Handler,
        login: Login,
        peer: SocketAddr,
        shared: Arc<Shared<F>>,
    ) -> Session<S, F> {
        let statements = Statements::new(
            shared.config.prepared_statements_max,
            shared.config.packet_bytes_max,
        );
        Session {
            io,
            handler,
            user: login.user,
            peer,
            database: login.database,
            multi_statements: login
                .capabilities
                .contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS),
            capabilities: login.capabilities,
            statements,
            shared,
        }
    }

    fn style(&self, binary: bool) -> AnswerStyle {
        AnswerStyle {
            deprecate_eof: self
                .capabilities
                .contains(CapabilityFlags::CLIENT_DEPRECATE_EOF),
            binary,
        }
    }

    fn ok(&self) -> Vec<u8> {
        ok_empty(status_flags(self.handler.status(), false))
    }

    /// Opens the login's database, answers the login's OK, then serves
    /// commands until the client quits, the connection fails, or `stop`
    /// says the server is stopping.
    pub(crate) async fn run(&mut self, mut stop: watch::Receiver<bool>) -> SessionEnd {
        if let Some(database) = self.database.clone() {
            if let Err(error) = self.handler.use_database(&database).await {
                self.io.send_final(&err_packet(&error, true)).await;
                return SessionEnd::Refused(error);
            }
        }
        let ok = self.ok();
        self.io.push(&ok);
        if let Err(error) = self.io.flush().await {
            return SessionEnd::Packet(error);
        }
        loop {
            self.io.reset_sequence();
            let wait_timeout = self.shared.config.wait_timeout;
            let packet = tokio::select! {
                biased;
                // A closed channel means the server is gone: stop too.
                () = stopping(&mut stop) => {
                    // Unasked for, as the idle timeout's 4031: a client reading
                    // its next answer learns why the connection went.
                    self.io.send_final(&err_packet(&errors::server_shutdown(), true)).await;
                    return SessionEnd::Shutdown;
                }
                packet = self.io.read_packet_within(wait_timeout) => packet,
            };
            let flow = match packet {
                Ok(payload) => self.dispatch(&payload).await,
                Err(error) => Err(error),
            };
            match flow {
                Ok(Flow::Continue) => {}
                Ok(Flow::End(end)) => return end,
                Err(error) => {
                    if let Some(answer) = error.answer() {
                        self.io.send_final(&err_packet(&answer, true)).await;
                    }
                    if !error.is_routine() {
                        tracing::warn!(%error, "closing the connection");
                    }
                    return SessionEnd::Packet(error);
                }
            }
        }
    }

    /// The handler's last word: rolls back whatever the client left open.
    pub(crate) async fn close(&mut self) {
        self.handler.close().await;
    }

    /// Answers a command packet that does not parse, and ends the session.
    async fn malformed(
        &mut self,
        what: impl std::fmt::Display + Send,
    ) -> Result<Flow, PacketError> {
        let error = errors::malformed(what);
        tracing::warn!(%error, "closing the connection");
        self.io.send_final(&err_packet(&error, true)).await;
        Ok(Flow::End(SessionEnd::Malformed(error)))
    }

    async fn answer_error(&mut self, error: &SqlError) -> Result<Flow, PacketError> {
        self.io.push(&err_packet(error, true));
        self.io.flush().await?;
        Ok(Flow::Continue)
    }

    async fn answer(&mut self, payload: &[u8]) -> Result<Flow, PacketError> {
        self.io.push(payload);
        self.io.flush().await?;
        Ok(Flow::Continue)
    }

    async fn dispatch(&mut self, payload: &[u8]) -> Result<Flow, PacketError> {
        let Some((&command, body)) = payload.split_first() else {
            return self.malformed("an empty command packet").await;
        };
        match command {
            COM_QUIT => Ok(Flow::End(SessionEnd::Quit)),
            COM_QUERY => self.query(body).await,
            COM_PING => {
                let ok = self.ok();
                self.answer(&ok).await
            }
            COM_INIT_DB => self.init_db(body).await,
            COM_STMT_PREPARE => self.prepare(body).await,
            COM_STMT_EXECUTE => self.execute(body).await,
            COM_STMT_CLOSE => match self.statements.close(body) {
                Ok(()) => Ok(Flow::Continue),
                Err(m) => self.malformed(format!("COM_STMT_CLOSE: {m}")).await,
            },
            COM_STMT_SEND_LONG_DATA => match self.statements.send_long_data(body) {
                Ok(()) => Ok(Flow::Continue),
                Err(m) => {
                    self.malformed(format!("COM_STMT_SEND_LONG_DATA: {m}"))
                        .await
                }
            },
            COM_STMT_RESET => match self.statements.reset(body) {
                Ok(Ok(())) => {
                    let ok = self.ok();
                    self.answer(&ok).await
                }
                Ok(Err(error)) => self.answer_error(&error).await,
                Err(m) => self.malformed(format!("COM_STMT_RESET: {m}")).await,
            },
            COM_STMT_FETCH => match Statements::statement_id(body) {
                Ok(id) => self.answer_error(&errors::no_open_cursor(id)).await,
                Err(m) => self.malformed(format!("COM_STMT_FETCH: {m}")).await,
            },
            COM_STMT_BULK_EXECUTE => {
                self.answer_error(&errors::not_supported_in_prepared())
                    .await
            }
            COM_FIELD_LIST => {
                // Deprecated since MySQL 5.7; the mariadb client still sends it
                // to complete names. No fields: an empty list, not an error.
                let end = end_of_rows(
                    self.style(false),
                    status_flags(self.handler.status(), false),
                );
                self.answer(&end).await
            }
            COM_STATISTICS => {
                let statistics = self.statistics();
                self.answer(statistics.as_bytes()).await
            }
            COM_SET_OPTION => self.set_option(body).await,
            COM_RESET_CONNECTION => self.reset_connection().await,
            other => {
                tracing::debug!(command = other, "unknown command");
                self.answer_error(&errors::unknown_command(other)).await
            }
        }
    }

    async fn query(&mut self, body: &[u8]) -> Result<Flow, PacketError> {
        let Ok(sql) = std::str::from_utf8(body) else {
            return self.answer_error(&errors::invalid_utf8(body)).await;
        };
        if !self.multi_statements && sql_scan::has_several_statements(sql) {
            return self.answer_error(&errors::multi_statements_off()).await;
        }
        self.shared.questions.fetch_add(1, Ordering::Relaxed);
        let style = self.style(false);
        let mut sink = WireSink::new(&mut self.io, style);
        self.handler.query(sql, &mut sink).await;
        sink.finish().await?;
        Ok(Flow::Continue)
    }

    async fn init_db(&mut self, body: &[u8]) -> Result<Flow, PacketError> {
        let Ok(database) = std::str::from_utf8(body) else {
            return self.answer_error(&errors::invalid_utf8(body)).await;
        };
        match self.handler.use_database(database).await {
            Ok(()) => {
                self.database = Some(database.to_string());
                let ok = self.ok();
                self.answer(&ok).await
            }
            Err(error) => self.answer_error(&error).await,
        }
    }

    async fn prepare(&mut self, body: &[u8]) -> Result<Flow, PacketError> {
        let Ok(sql) = std::str::from_utf8(body) else {
            return self.answer_error(&errors::invalid_utf8(body)).await;
        };
        let (id, params) = match self.statements.prepare(sql) {
            Ok(prepared) => prepared,
            Err(error) => return self.answer_error(&error).await,
        };
        // The executor checks the statement and names its result columns
        // now, as MySQL does: libmariadb relies on the count announced here.
        let columns = match self.handler.prepare(sql).await {
            Ok(columns) => columns,
            Err(error) => {
                self.statements.forget(id);
                return self.answer_error(&error).await;
            }
        };
        let Ok(column_count) = u16::try_from(columns.len()) else {
            self.statements.forget(id);
            let error = errors::internal(format!("a result of {} columns", columns.len()));
            return self.answer_error(&error).await;
        };
        let deprecate_eof = self.style(false).deprecate_eof;
        let eof = eof_packet(0, status_flags(self.handler.status(), false));
        let mut ok = vec![0x00];
        put_u32(&mut ok, id);
        put_u16(&mut ok, column_count);
        put_u16(&mut ok, params);
        ok.push(0);
        put_u16(&mut ok, 0);
        self.io.push(&ok);
        if params > 0 {
            let param = column_definition(&placeholder_column());
            for _ in 0..params {
                self.io.send(&param).await?;
            }
            if !deprecate_eof {
                self.io.push(&eof);
            }
        }
        if !columns.is_empty() {
            for column in &columns {
                self.io.send(&column_definition(column)).await?;
            }
            if !deprecate_eof {
                self.io.push(&eof);
            }
        }
        self.io.flush().await?;
        Ok(Flow::Continue)
    }

    async fn execute(&mut self, body: &[u8]) -> Result<Flow, PacketError> {
        let execution = match self.statements.bind(body) {
            Ok(execution) => execution,
            Err(BindError::Refused(error)) => return self.answer_error(&error).await,
            Err(BindError::Malformed(m)) => {
                return self.malformed(format!("COM_STMT_EXECUTE: {m}")).await
            }
        };
        self.shared.questions.fetch_add(1, Ordering::Relaxed);
        let style = self.style(true);
        let mut sink = WireSink::new(&mut self.io, style);
        self.handler.execute(&execution, &mut sink).await;
        sink.finish().await?;
        Ok(Flow::Continue)
    }

    async fn set_option(&mut self, body: &[u8]) -> Result<Flow, PacketError> {
        let option = match Reader::new(body).u16("the option") {
            Ok(option) => option,
            Err(Malformed(what)) => return self.malformed(format!("COM_SET_OPTION: {what}")).await,
        };
        match option {
            0 => self.multi_statements = true,
            1 => self.multi_statements = false,
            _ => {
                let error = SqlError::new(
                    1047,
                    "08S01",
                    format!(
                        "Unknown COM_SET_OPTION option {option} (0: multi-statements on, 1: off)"
                    ),
                );
                return self.answer_error(&error).await;
            }
        }
        // MySQL answers this command with an EOF (an OK-as-EOF for
        // CLIENT_DEPRECATE_EOF clients).
        let end = end_of_rows(
            self.style(false),
            status_flags(self.handler.status(), false),
        );
        self.answer(&end).await
    }

    /// `COM_RESET_CONNECTION`: a fresh session for the same user, as if
    /// reconnected, without a new login: the old handler closes (rolling
    /// back), prepared statements go, and the database stays.
    async fn reset_connection(&mut self) -> Result<Flow, PacketError> {
        self.handler.close().await;
        self.handler = self.shared.factory.handler(&self.user, self.peer);
        self.statements.clear();
        self.multi_statements = self
            .capabilities
            .contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS);
        if let Some(database) = self.database.clone() {
            if let Err(error) = self.handler.use_database(&database).await {
                self.database = None;
                return self.answer_error(&error).await;
            }
        }
        let ok = self.ok();
        self.answer(&ok).await
    }

    /// `COM_STATISTICS`'s one line, in mysqladmin's format.
    fn statistics(&self) -> String {
        let uptime_s = self.shared.started.elapsed().as_secs();
        let questions = self.shared.questions.load(Ordering::Relaxed);
        let threads = self.shared.connections.load(Ordering::Relaxed);
        let per_second = questions as f64 / uptime_s.max(1) as f64;
        format!(
            "Uptime: {uptime_s}  Threads: {threads}  Questions: {questions}  Slow queries: 0  \
             Opens: 0  Open tables: 0  Queries per second avg: {per_second:.3}"
        )
    }
}

/// Returns once the server is stopping (or gone). The watch's guard is
/// dropped here, not held across the caller's awaits.
async fn stopping(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopping| *stopping).await;
}

/// How a `?` is described to the client: MySQL's own placeholder
/// definition, a nullable string.
fn placeholder_column() -> Column {
    Column {
        name: "?".to_string(),
        table: String::new(),
        schema: String::new(),
        kind: ColumnKind::VarString,
        length: 0,
        decimals: 0,
        nullable: true,
        unsigned: false,
        binary: true,
        primary_key: false,
    }
}
