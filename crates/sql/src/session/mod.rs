//! One client connection's SQL session: its current database, autocommit,
//! the open transaction and its variables, and the dispatch of each
//! statement to the executor ([`crate::exec`]).
//!
//! Transactions follow MySQL's rules over Shoal's (READ COMMITTED, as
//! NDB): with autocommit on and no `BEGIN`, each statement runs in a
//! transaction of its own, committed at its end (rolled back if it
//! fails); `BEGIN` / `START TRANSACTION`, or `SET autocommit = 0` and a
//! statement, open a transaction that `COMMIT` or `ROLLBACK` ends; DDL
//! commits the open transaction first. Plain SELECTs read committed rows;
//! `FOR UPDATE` and `FOR SHARE` / `LOCK IN SHARE MODE` lock them.
//!
//! Invariants:
//! - `txn` is `Some` only while `in_transaction` (it is made lazily at
//!   the transaction's first statement).
//! - When Shoal aborts the open transaction (a lock wait timeout, a
//!   duplicate key, a node failure), the statement's error is returned
//!   and the transaction is gone: the session is out of it, as a MySQL
//!   client is told by the status flags, and later statements start
//!   afresh. An error of the SQL node's own (unknown column, bad value)
//!   leaves the transaction open.
//! - Closing the session rolls back what is open, so nothing stays
//!   locked.
//! - Every statement runs with the session's privileges in scope
//!   (`exec::users::privileges`, checked where the catalog resolves
//!   names): `statement` for parsed ones, `use_db` and `prepare` for
//!   theirs. A new way in must do the same, or its lookups are refused.

use crate::answer::{AnswerEnd, AnswerSink, Collected, ResultStream, FLUSH_BYTES};
use crate::exec::error::from_shoal;
use crate::exec::split::{parse, split, Parsed};
use crate::exec::template::Templates;
use crate::exec::users::{self, ClusterUsers, Privileges};
use crate::exec::warnings::{self, Diagnostics};
use crate::exec::{dml, information_schema, insert, select, Env, Limits};
use crate::handler::{Execution, Handler, HandlerFactory, SessionStatus};
use crate::outcome::{Column, Outcome, SqlError};
use shoal_client::{Cluster, ExecType, Transaction, TransactionState, Value};
use sqlparser::ast::{Delete, Insert, Query, Statement, Update};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

mod statements;
mod variables;

use variables::default_variables;

/// The version the SQL node reports (`@@version`, `VERSION()`): MySQL 8's
/// dialect, then Shoal's name.
pub const SERVER_VERSION: &str = "8.0.36-shoal";
/// `@@version_comment` (the `mariadb` client prints it at connect).
pub const VERSION_COMMENT: &str = "Shoal SQL node (NDB-style cluster)";
/// `@@max_allowed_packet` unless the factory says otherwise.
pub const MAX_ALLOWED_PACKET_DEFAULT: u64 = 64 << 20;

/// An error a statement meets while compiling against a table's cached
/// definition (before anything runs): an unknown column, a count of
/// values that does not match the columns.
fn compile_error_of_a_stale_table(code: u16) -> bool {
    matches!(code, 1054 | 1136)
}

/// An error a value meets against its column's cached definition: too
/// long, out of range, of the wrong type, NULL in NOT NULL, no default.
fn value_error_of_a_stale_table(code: u16) -> bool {
    matches!(code, 1406 | 1264 | 1366 | 1048 | 1364)
}

/// Makes a [`Session`] per authenticated connection, all on one cluster
/// connection (the SQL node is one API node).
pub struct SessionFactory {
    cluster: Cluster,
    /// The cluster's accounts, shared by the logins and the sessions.
    users: Arc<ClusterUsers>,
    next_connection_id: Arc<AtomicU32>,
    limits: Limits,
    /// Variables every session starts with, over the defaults.
    overrides: BTreeMap<String, Value>,
}

impl SessionFactory {
    pub fn new(cluster: Cluster) -> SessionFactory {
        SessionFactory {
            users: Arc::new(ClusterUsers::new(cluster.clone())),
            cluster,
            next_connection_id: Arc::new(AtomicU32::new(1)),
            limits: Limits::default(),
            overrides: BTreeMap::new(),
        }
    }

    /// The accounts logins are checked against (the protocol server's
    /// `UserDirectory`).
    pub fn users(&self) -> Arc<ClusterUsers> {
        self.users.clone()
    }

    /// Statement limits of every session.
    pub fn with_limits(mut self, limits: Limits) -> SessionFactory {
        self.limits = limits;
        self
    }

    /// Starts every session with `@@name` = `value` (for what the server
    /// decides: `max_allowed_packet`, `port`, ...).
    pub fn with_variable(mut self, name: &str, value: Value) -> SessionFactory {
        self.overrides.insert(name.to_ascii_lowercase(), value);
        self
    }

    /// A session for `user` connected from `host` (no handshake: tests
    /// and tools that drive sessions directly).
    pub fn session(&self, user: &str, host: &str) -> Session {
        let id = self.next_connection_id.fetch_add(1, Ordering::Relaxed);
        let mut s = Session::new(self.cluster.clone(), user, host, id).with_limits(self.limits);
        s.users = self.users.clone();
        for (k, v) in &self.overrides {
            s.variables.insert(k.clone(), v.clone());
        }
        s
    }
}

impl HandlerFactory for SessionFactory {
    type Handler = Session;

    fn handler(&self, user: &str, peer: SocketAddr) -> Session {
        self.session(user, &peer.ip().to_string())
    }
}

/// One connection's session (see the module's documentation).
pub struct Session {
    cluster: Cluster,
    user: String,
    host: String,
    users: Arc<ClusterUsers>,
    /// What the session may do: read from mgmd at its first statement
    /// and at each USE, and again after it changed accounts.
    privileges: Option<Arc<Privileges>>,
    connection_id: u32,
    database: Option<String>,
    autocommit: bool,
    /// In a transaction: after BEGIN, or after a statement with autocommit
    /// off, until COMMIT / ROLLBACK (or Shoal aborts it).
    in_transaction: bool,
    /// The open transaction's Shoal transaction, once a statement used it.
    txn: Option<Transaction>,
    variables: BTreeMap<String, Value>,
    user_variables: HashMap<String, Value>,
    last_insert_id: u64,
    limits: Limits,
    /// Prepared statements kept parsed.
    templates: Templates,
    /// The last statement's conditions (SHOW WARNINGS, `exec::warnings`).
    diagnostics: Diagnostics,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("connection_id", &self.connection_id)
            .field("user", &self.user)
            .field("database", &self.database)
            .field("autocommit", &self.autocommit)
            .field("in_transaction", &self.in_transaction)
            .finish()
    }
}

/// A statement that runs in a transaction.
#[derive(Clone, Copy)]
enum Work<'a> {
    Select(&'a Query, &'a str),
    Insert(&'a Insert),
    Update(&'a Update),
    Delete(&'a Delete),
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Session {
    pub fn new(cluster: Cluster, user: &str, host: &str, connection_id: u32) -> Session {
        Session {
            users: Arc::new(ClusterUsers::new(cluster.clone())),
            privileges: None,
            cluster,
            user: user.to_string(),
            host: host.to_string(),
            connection_id,
            database: None,
            autocommit: true,
            in_transaction: false,
            txn: None,
            variables: default_variables(),
            user_variables: HashMap::new(),
            last_insert_id: 0,
            limits: Limits::default(),
            templates: Templates::default(),
            diagnostics: Diagnostics::default(),
        }
    }

    pub fn with_limits(mut self, limits: Limits) -> Session {
        self.limits = limits;
        self
    }

    /// The current database (`None` until USE or a handshake's database).
    pub fn database(&self) -> Option<&str> {
        self.database.as_deref()
    }

    pub fn connection_id(&self) -> u32 {
        self.connection_id
    }

    pub fn autocommit(&self) -> bool {
        self.autocommit
    }

    pub fn in_transaction(&self) -> bool {
        self.in_transaction
    }

    fn env(&self) -> Env<'_> {
        Env {
            database: self.database.as_deref(),
            user: &self.user,
            host: &self.host,
            connection_id: self.connection_id,
            variables: &self.variables,
            user_variables: &self.user_variables,
            last_insert_id: self.last_insert_id,
            now_secs: now_secs(),
            limits: self.limits,
            own_transaction: false,
            describe_only: false,
            warning_count: self.diagnostics.warning_count(),
            error_count: self.diagnostics.error_count(),
            subqueries: None,
        }
    }

    /// Runs `sql`: each statement in turn, each answer written to `sink`
    /// as it comes, stopping after the first error (its answer is the
    /// last).
    pub async fn run(&mut self, sql: &str, sink: &mut dyn AnswerSink) {
        let pieces = match split(sql) {
            Ok(p) => p,
            Err(e) => {
                // The client being gone is the sink's to report.
                let _ = sink.whole(Err(e), self.answer_end(false)).await;
                return;
            }
        };
        let count = pieces.len();
        for (i, piece) in pieces.into_iter().enumerate() {
            let more = i + 1 < count;
            let recording = warnings::recording(None, warnings::notes_on(&self.variables));
            let (result, raised, keeps) = match users::recognize(&piece) {
                Some(account) => {
                    let (r, raised) =
                        warnings::collect(recording, Box::pin(self.account_statement(account)))
                            .await;
                    (r, raised, false)
                }
                None => match parse(&piece) {
                    Ok(parsed) => {
                        let mut stream = ResultStream::new(sink, self.streaming_now(more));
                        self.diagnosed(&parsed, Some(&mut stream)).await
                    }
                    Err(e) => (Err(e), Diagnostics::default(), false),
                },
            };
            if !self.answer(sink, result, raised, keeps, more).await {
                break;
            }
        }
    }

    /// Runs `sql` as [`Self::run`] does, keeping the answers (a streamed
    /// result set as its rows in text): for tests and tools that drive
    /// a session without a wire.
    pub async fn run_collected(&mut self, sql: &str) -> Vec<Result<Outcome, SqlError>> {
        let mut sink = Collected::default();
        self.run(sql, &mut sink).await;
        sink.into_answers()
    }

    /// Runs a prepared statement as [`Handler::execute`] does, keeping
    /// its answer.
    pub async fn execute_collected(
        &mut self,
        execution: &Execution,
    ) -> Vec<Result<Outcome, SqlError>> {
        let mut sink = Collected::default();
        self.execute(execution, &mut sink).await;
        sink.into_answers()
    }

    /// What an answer reports now.
    fn answer_end(&self, more: bool) -> AnswerEnd {
        AnswerEnd {
            status: self.status(),
            more,
        }
    }

    /// What a streamed result set's column definitions report: only a
    /// SELECT streams, and with autocommit off it runs in a transaction
    /// (opened by it, if none was), as the status then says.
    fn streaming_now(&self, more: bool) -> AnswerEnd {
        let mut now = self.answer_end(more);
        now.status.in_transaction |= !self.autocommit;
        now
    }

    /// Writes a statement's answer (its warnings settled) to `sink`, and
    /// sends what is gathered once it is enough; `false` if the list ends
    /// here (an error, or the client is gone: the statements after it do
    /// not run).
    async fn answer(
        &mut self,
        sink: &mut dyn AnswerSink,
        mut result: Result<Outcome, SqlError>,
        raised: Diagnostics,
        keeps: bool,
        more: bool,
    ) -> bool {
        self.diagnostics.settle(raised, &mut result, keeps);
        let failed = result.is_err();
        let end = self.answer_end(more && !failed);
        let written = match result {
            Ok(Outcome::Streamed) => {
                sink.end_rows(end);
                Ok(())
            }
            other => sink.whole(other, end).await,
        };
        // A failure is the sink's to report: the connection ends.
        let sent = match written {
            Ok(()) if sink.buffered() >= FLUSH_BYTES => sink.flush().await,
            other => other,
        };
        !failed && sent.is_ok()
    }

    /// Commits the open transaction (DDL, BEGIN inside a transaction,
    /// `SET autocommit = 1` do, as in MySQL).
    async fn implicit_commit(&mut self) -> Result<(), SqlError> {
        self.in_transaction = false;
        match self.txn.take() {
            Some(mut t) => t
                .execute(ExecType::Commit)
                .await
                .map_err(|e| from_shoal(&e)),
            None => Ok(()),
        }
    }

    /// Runs `work` in the open transaction, or in one of its own. A
    /// statement that met a definition this node cached and another node
    /// has changed since runs once more on mgmd's current schema, unless
    /// part of its answer went out already: an autocommit one that a data
    /// node refused as stale (1412: nothing of it was done), and one that
    /// failed on the cached definition alone, once mgmd confirms that a
    /// cached table had changed ([`Self::stale_explains`]). An unknown
    /// column or a wrong count of values comes while compiling, before
    /// anything runs, so it runs again inside a transaction too; a value
    /// refused for its column may come after some rows were written, so
    /// only an autocommit statement (rolled back whole) runs again.
    async fn transactional(
        &mut self,
        work: Work<'_>,
        mut stream: Option<&mut ResultStream<'_>>,
    ) -> Result<Outcome, SqlError> {
        let own = !self.in_transaction && self.autocommit;
        let first = self.transactional_once(work, stream.as_deref_mut()).await;
        let Err(e) = &first else {
            return first;
        };
        if stream.as_ref().is_some_and(|s| s.started()) {
            return first;
        }
        let retry = match e.code {
            1412 => own,
            c if compile_error_of_a_stale_table(c) && (own || self.in_transaction) => {
                self.stale_explains(e).await
            }
            c if value_error_of_a_stale_table(c) && own => self.stale_explains(e).await,
            _ => false,
        };
        if !retry {
            return first;
        }
        warnings::forget();
        self.transactional_once(work, stream).await
    }

    /// Whether mgmd says a table this node cached has changed since, so
    /// that `e`, decided on the cached definition, may not hold (the
    /// stale ones are forgotten: the next try reads mgmd's).
    async fn stale_explains(&self, e: &SqlError) -> bool {
        let possible =
            compile_error_of_a_stale_table(e.code) || value_error_of_a_stale_table(e.code);
        possible
            && self
                .cluster
                .forget_stale_tables()
                .await
                .is_ok_and(|forgot| forgot > 0)
    }

    async fn transactional_once(
        &mut self,
        work: Work<'_>,
        stream: Option<&mut ResultStream<'_>>,
    ) -> Result<Outcome, SqlError> {
        let own = !self.in_transaction && self.autocommit;
        if !own {
            self.in_transaction = true;
        }
        let mut txn = match self.txn.take() {
            Some(t) => t,
            None => self.cluster.transaction(),
        };
        // The first AUTO_INCREMENT value an INSERT generated: the session's
        // LAST_INSERT_ID() once it succeeded (statements that generate
        // none leave it as it was, as in MySQL).
        let mut generated = None;
        let result = {
            let mut env = self.env();
            env.own_transaction = own;
            let cluster = &self.cluster;
            match work {
                Work::Select(q, text) => {
                    select::select(&env, cluster, &mut txn, q, text, stream).await
                }
                Work::Insert(i) => {
                    insert::insert(&env, cluster, &mut txn, i)
                        .await
                        .map(|(outcome, first)| {
                            generated = first;
                            outcome
                        })
                }
                Work::Update(u) => dml::update(&env, cluster, &mut txn, u).await,
                Work::Delete(d) => dml::delete(&env, cluster, &mut txn, d).await,
            }
        };
        match result {
            Ok(outcome) => {
                if own {
                    // Its last batch may have committed it already.
                    if txn.state() != TransactionState::Committed {
                        txn.execute(ExecType::Commit)
                            .await
                            .map_err(|e| from_shoal(&e))?;
                    }
                } else {
                    self.txn = Some(txn);
                }
                if let Some(id) = generated {
                    self.last_insert_id = id;
                }
                Ok(outcome)
            }
            Err(e) => {
                let gone = matches!(
                    txn.state(),
                    TransactionState::Aborted
                        | TransactionState::Failed
                        | TransactionState::Committed
                );
                if own {
                    // Dropped: rolled back on the data node.
                    drop(txn);
                } else if gone {
                    // Shoal aborted it: the session is out of it (MySQL
                    // rolls back the whole transaction here too).
                    self.in_transaction = false;
                    drop(txn);
                } else {
                    self.txn = Some(txn);
                }
                Err(e)
            }
        }
    }

    /// The session's privileges, read from mgmd if not yet.
    async fn privileges(&mut self) -> Arc<Privileges> {
        if let Some(p) = &self.privileges {
            return p.clone();
        }
        let peer = users::peer_address(&self.host);
        let p = Arc::new(Box::pin(self.users.privileges(&self.user, peer, &self.host)).await);
        self.privileges = Some(p.clone());
        p
    }

    /// CREATE / ALTER / DROP USER, SET PASSWORD, GRANT, REVOKE, SHOW
    /// GRANTS; those that change accounts commit first, as DDL does.
    async fn account_statement(
        &mut self,
        statement: Result<users::AccountStatement, SqlError>,
    ) -> Result<Outcome, SqlError> {
        let statement = statement?;
        if statement.changes_accounts() {
            self.implicit_commit().await?;
        }
        let privileges = self.privileges().await;
        let ctx = users::Context {
            cluster: &self.cluster,
            privileges: &privileges,
            database: self.database.as_deref(),
        };
        let out = users::run(&ctx, &statement).await;
        if statement.changes_accounts() {
            // It may have changed this session's own grants.
            self.privileges = None;
        }
        out
    }

    /// Runs one parsed statement, collecting the conditions it raises;
    /// and whether it keeps the session's list when it raises none.
    async fn diagnosed(
        &mut self,
        parsed: &Parsed,
        stream: Option<&mut ResultStream<'_>>,
    ) -> (Result<Outcome, SqlError>, Diagnostics, bool) {
        let notes = warnings::notes_on(&self.variables);
        let recording = warnings::recording(Some(&parsed.statement), notes);
        let (result, raised) = warnings::collect(recording, self.statement(parsed, stream)).await;
        (result, raised, warnings::keeps_list(&parsed.statement))
    }

    /// Runs one parsed statement with the session's privileges in scope
    /// (the catalog checks every database and table it names).
    /// A SELECT's rows go to `stream` as they are read, if there is one.
    async fn statement(
        &mut self,
        parsed: &Parsed,
        stream: Option<&mut ResultStream<'_>>,
    ) -> Result<Outcome, SqlError> {
        let privileges = self.privileges().await;
        // Boxed once here, so the layers above move a pointer, not the
        // statement's whole future.
        let run = Box::pin(self.statement_in_scope(parsed, stream));
        users::privileges::scope(privileges, run).await
    }

    /// Reads and writes of rows run here; every other statement in
    /// [`Self::other_statement`], boxed: a future is as large as its
    /// largest branch, and it is copied whole each time it is wrapped, so
    /// the rare statements' futures would slow every point select.
    async fn statement_in_scope(
        &mut self,
        parsed: &Parsed,
        stream: Option<&mut ResultStream<'_>>,
    ) -> Result<Outcome, SqlError> {
        let text = parsed.text.as_str();
        information_schema::refuse_write(&parsed.statement, self.database.as_deref())?;
        match &parsed.statement {
            Statement::Query(q) if information_schema::is_read_by(q, self.database.as_deref()) => {
                Box::pin(information_schema::select(
                    &self.env(),
                    &self.cluster,
                    q,
                    text,
                ))
                .await
            }
            Statement::Query(q) => self.transactional(Work::Select(q, text), stream).await,
            Statement::Insert(i) => self.transactional(Work::Insert(i), None).await,
            Statement::Update(u) => self.transactional(Work::Update(u), None).await,
            Statement::Delete(d) => self.transactional(Work::Delete(d), None).await,
            _ => Box::pin(self.other_statement(parsed)).await,
        }
    }
}

impl Handler for Session {
    fn query(
        &mut self,
        sql: &str,
        sink: &mut dyn AnswerSink,
    ) -> impl std::future::Future<Output = ()> + Send {
        self.run(sql, sink)
    }

    async fn use_database(&mut self, database: &str) -> Result<(), SqlError> {
        self.use_db(database).await
    }

    /// Runs a prepared statement from its parsed tree when it can (see
    /// [`Templates`]), else spliced and parsed.
    async fn execute(&mut self, execution: &Execution, sink: &mut dyn AnswerSink) {
        match self
            .templates
            .bind(&execution.template, &execution.literals)
        {
            Some(parsed) => {
                let mut stream = ResultStream::new(sink, self.streaming_now(false));
                let (result, raised, keeps) = self.diagnosed(&parsed, Some(&mut stream)).await;
                self.answer(sink, result, raised, keeps, false).await;
            }
            None => Box::pin(self.run(&execution.spliced(), sink)).await,
        }
    }

    /// Describes a statement with `?` parameters: a SELECT's result
    /// columns (its table and columns resolved now, so an unknown one
    /// fails here), SHOW's and DESCRIBE's by running them (they only
    /// read), nothing for the others.
    async fn prepare(&mut self, sql: &str) -> Result<Vec<Column>, SqlError> {
        match self.prepare_once(sql).await {
            // Described on a definition another node has changed since.
            Err(e) if self.stale_explains(&e).await => self.prepare_once(sql).await,
            other => other,
        }
    }

    fn status(&self) -> SessionStatus {
        SessionStatus {
            in_transaction: self.in_transaction,
            autocommit: self.autocommit,
        }
    }

    async fn close(&mut self) {
        self.in_transaction = false;
        if let Some(mut t) = self.txn.take() {
            if let Err(e) = t.execute(ExecType::Rollback).await {
                tracing::debug!(
                    "rolling back connection {}'s transaction at close: {e}",
                    self.connection_id
                );
            }
        }
    }
}

impl Session {
    /// [`Handler::prepare`], once.
    async fn prepare_once(&mut self, sql: &str) -> Result<Vec<Column>, SqlError> {
        let pieces = split(sql)?;
        let [one] = pieces.as_slice() else {
            return Err(SqlError::syntax(
                "a prepared statement holds exactly one statement",
            ));
        };
        if let Some(account) = users::recognize(one) {
            // Only SHOW GRANTS returns rows, and it only reads.
            return match account? {
                show @ users::AccountStatement::ShowGrants { .. } => {
                    match self.account_statement(Ok(show)).await? {
                        Outcome::Rows { columns, .. } => Ok(columns),
                        Outcome::Ok { .. } | Outcome::Streamed => Ok(Vec::new()),
                    }
                }
                _ => Ok(Vec::new()),
            };
        }
        let parsed = parse(one)?;
        match &parsed.statement {
            Statement::Query(q) => {
                let privileges = self.privileges().await;
                let mut env = self.env();
                env.describe_only = true;
                if information_schema::is_read_by(q, self.database.as_deref()) {
                    let describe =
                        information_schema::describe(&env, &self.cluster, q, &parsed.text);
                    return users::privileges::scope(privileges, describe).await;
                }
                let describe = select::describe(&env, &self.cluster, q, &parsed.text);
                users::privileges::scope(privileges, describe).await
            }
            Statement::ShowDatabases { .. }
            | Statement::ShowSchemas { .. }
            | Statement::ShowTables { .. }
            | Statement::ShowColumns { .. }
            | Statement::ExplainTable { .. }
            | Statement::ShowCreate { .. }
            | Statement::ShowVariables { .. }
            | Statement::ShowStatus { .. }
            | Statement::ShowVariable { .. } => match self.statement(&parsed, None).await? {
                Outcome::Rows { columns, .. } => Ok(columns),
                Outcome::Ok { .. } | Outcome::Streamed => Ok(Vec::new()),
            },
            _ => Ok(Vec::new()),
        }
    }
}
