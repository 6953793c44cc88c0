//! The listener: accepts connections, one task each, up to
//! `connections_max`, and stops gracefully on request.
//!
//! Invariants:
//! - at most `connections_max` connections are served at once; one more
//!   is told 1040 "Too many connections" and closed at once, without a
//!   task, so a flood costs one accept and one write each;
//! - once a client has logged in, its handler's `close()` runs however the
//!   connection ends (COM_QUIT, a vanished client, a protocol error, a
//!   timeout, shutdown), so nothing it held stays locked; a statement
//!   already running is not cancelled but finishes first;
//! - a graceful stop closes idle connections at once, lets running
//!   commands finish, and returns when every connection is gone.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::timeout;
use tracing::Instrument;

use super::auth::{UserDirectory, Users};
use super::command::Session;
use super::errors;
use super::handshake::{login, LoginError};
use super::packet::{PacketIo, PacketLimits};
use super::resultset::err_packet;
use crate::handler::HandlerFactory;

/// The SQL node's protocol settings. Every limit is here, with MySQL's
/// name for it where MySQL has one.
#[derive(Clone)]
pub struct ServerConfig {
    /// The version the greeting announces. It starts with a MySQL 8.0
    /// version because connectors choose their code paths by it.
    pub server_version: String,
    /// Connections served at once (`max_connections`); one more gets 1040.
    pub connections_max: usize,
    /// The largest packet a client may send, joined from its 16 MiB
    /// pieces (`max_allowed_packet`); a larger one gets 1153 and the
    /// connection is closed. Also bounds a statement's long data.
    pub packet_bytes_max: usize,
    /// Time from accepting a connection to the end of authentication
    /// (`connect_timeout`).
    pub connect_timeout: Duration,
    /// Time a logged-in client may stay silent between commands
    /// (`wait_timeout`); then it is told 4031 and disconnected.
    pub wait_timeout: Duration,
    /// Time one read inside a packet may take (`net_read_timeout`).
    pub net_read_timeout: Duration,
    /// Time writing a buffered answer may take (`net_write_timeout`): a
    /// client that stops reading its results is disconnected.
    pub net_write_timeout: Duration,
    /// Prepared statements open on one connection (MySQL's
    /// `max_prepared_stmt_count` is server-wide; Shoal counts per
    /// connection, so one client cannot starve the others).
    pub prepared_statements_max: usize,
    /// Who may log in.
    pub users: Arc<dyn UserDirectory>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            server_version: format!("8.0.35-Shoal-{}", env!("CARGO_PKG_VERSION")),
            connections_max: 1024,
            packet_bytes_max: 64 << 20,
            connect_timeout: Duration::from_secs(10),
            wait_timeout: Duration::from_secs(8 * 3600),
            net_read_timeout: Duration::from_secs(30),
            net_write_timeout: Duration::from_secs(60),
            prepared_statements_max: 1024,
            users: Arc::new(Users::default()),
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("server_version", &self.server_version)
            .field("connections_max", &self.connections_max)
            .field("packet_bytes_max", &self.packet_bytes_max)
            .field("connect_timeout", &self.connect_timeout)
            .field("wait_timeout", &self.wait_timeout)
            .field("net_read_timeout", &self.net_read_timeout)
            .field("net_write_timeout", &self.net_write_timeout)
            .field("prepared_statements_max", &self.prepared_statements_max)
            .finish_non_exhaustive()
    }
}

impl ServerConfig {
    /// The smallest `packet_bytes_max` accepted: MySQL's minimum for
    /// `max_allowed_packet`, room for any handshake.
    pub const PACKET_BYTES_MIN: usize = 1024;

    /// Checks the settings; the message says which one is wrong and why.
    pub fn validate(&self) -> Result<(), String> {
        if self.server_version.is_empty() || self.server_version.contains('\0') {
            return Err("server_version must be non-empty text without NUL".to_string());
        }
        if self.connections_max == 0 {
            return Err("connections_max must be at least 1".to_string());
        }
        if self.packet_bytes_max < Self::PACKET_BYTES_MIN {
            return Err(format!(
                "packet_bytes_max (max_allowed_packet) must be at least {} bytes, not {}",
                Self::PACKET_BYTES_MIN,
                self.packet_bytes_max
            ));
        }
        let timeouts = [
            ("connect_timeout", self.connect_timeout),
            ("wait_timeout", self.wait_timeout),
            ("net_read_timeout", self.net_read_timeout),
            ("net_write_timeout", self.net_write_timeout),
        ];
        if let Some((name, _)) = timeouts.iter().find(|(_, t)| t.is_zero()) {
            return Err(format!("{name} must be longer than zero"));
        }
        Ok(())
    }

    pub(crate) fn packet_limits(&self) -> PacketLimits {
        PacketLimits {
            packet_bytes_max: self.packet_bytes_max,
            net_read_timeout: self.net_read_timeout,
            net_write_timeout: self.net_write_timeout,
        }
    }
}

/// The largest packet a client may send before it has logged in.
const LOGIN_PACKET_BYTES_MAX: usize = 64 << 10;

/// What every connection of one server shares.
pub(crate) struct Shared<F> {
    pub(crate) factory: Arc<F>,
    pub(crate) config: ServerConfig,
    pub(crate) started: Instant,
    /// Statements run (`Questions` in `COM_STATISTICS`).
    pub(crate) questions: AtomicU64,
    /// Connections open now.
    pub(crate) connections: AtomicUsize,
    next_connection_id: AtomicU32,
}

/// Serves the MySQL protocol on `listener` until the process ends: a task
/// per connection, each with a handler from `factory` once its client
/// logged in. Fails only if `config` is invalid. For a graceful stop use
/// [`serve_with_shutdown`].
pub async fn serve<F: HandlerFactory>(
    listener: TcpListener,
    factory: Arc<F>,
    config: ServerConfig,
) -> io::Result<()> {
    serve_with_shutdown(listener, factory, config, std::future::pending()).await
}

/// [`serve`] until `shutdown` completes; then stops accepting, closes
/// idle connections, lets running commands finish (their handlers'
/// `close()` runs), and returns once every connection is gone. Wrap the
/// call in a timeout to bound that wait.
pub async fn serve_with_shutdown<F: HandlerFactory>(
    listener: TcpListener,
    factory: Arc<F>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    config.validate().map_err(|why| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("SQL server config: {why}"),
        )
    })?;
    let permits = Arc::new(Semaphore::new(config.connections_max));
    let shared = Arc::new(Shared {
        factory,
        config,
        started: Instant::now(),
        questions: AtomicU64::new(0),
        connections: AtomicUsize::new(0),
        next_connection_id: AtomicU32::new(1),
    });
    let (stop_sender, stop) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match permits.clone().try_acquire_owned() {
                    Ok(permit) => {
                        let shared = shared.clone();
                        let stop = stop.clone();
                        tasks.spawn(async move {
                            connection(stream, peer, shared, stop).await;
                            drop(permit);
                        });
                    }
                    Err(_) => refuse_too_many(stream, peer),
                },
                Err(error) => {
                    // Out of file descriptors, mostly: back off instead of
                    // spinning on an accept that keeps failing.
                    tracing::warn!(%error, "accepting a SQL connection failed; retrying in 100 ms");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(finished) = tasks.join_next(), if !tasks.is_empty() => report_task_end(finished),
        }
    }
    tracing::info!(
        connections = tasks.len(),
        "SQL server stopping: closing idle connections, waiting for running commands"
    );
    drop(listener);
    let _ = stop_sender.send(true);
    while let Some(finished) = tasks.join_next().await {
        report_task_end(finished);
    }
    Ok(())
}

fn report_task_end(finished: Result<(), tokio::task::JoinError>) {
    if let Err(error) = finished {
        // A handler that panicked took its connection down, not the server.
        tracing::warn!(%error, "a SQL connection task failed");
    }
}

/// Tells a connection past the limit why it is closed, without waiting:
/// the greeting-sized error fits any fresh socket's send buffer.
fn refuse_too_many(stream: TcpStream, peer: SocketAddr) {
    tracing::warn!(%peer, "refusing a SQL connection: too many connections");
    let payload = err_packet(&errors::too_many_connections(), false);
    let mut packet = (payload.len() as u32).to_le_bytes();
    packet[3] = 0;
    let mut bytes = packet.to_vec();
    bytes.extend_from_slice(&payload);
    let _ = stream.try_write(&bytes);
}

/// Counts an open connection until dropped (also if its task panics).
struct OpenConnection<'a>(&'a AtomicUsize);

impl<'a> OpenConnection<'a> {
    fn count(connections: &'a AtomicUsize) -> OpenConnection<'a> {
        connections.fetch_add(1, Ordering::Relaxed);
        OpenConnection(connections)
    }
}

impl Drop for OpenConnection<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One connection, from greeting to close.
async fn connection<F: HandlerFactory>(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared<F>>,
    stop: watch::Receiver<bool>,
) {
    let connection_id = shared.next_connection_id.fetch_add(1, Ordering::Relaxed);
    let span = tracing::debug_span!("sql_connection", id = connection_id, %peer);
    async move {
        // Answers are small and latency-bound; Nagle would hold them back.
        let _ = stream.set_nodelay(true);
        let _counted = OpenConnection::count(&shared.connections);
        tracing::debug!("connection opened");
        // Until the client has logged in its packets are small (a handshake
        // response, an auth reply): a stranger may not make the node hold
        // `max_allowed_packet` bytes per connection.
        let mut login_limits = shared.config.packet_limits();
        login_limits.packet_bytes_max = login_limits.packet_bytes_max.min(LOGIN_PACKET_BYTES_MAX);
        let mut io = PacketIo::new(stream, login_limits);
        let logged_in = timeout(
            shared.config.connect_timeout,
            login(
                &mut io,
                shared.config.users.as_ref(),
                peer.ip(),
                &shared.config.server_version,
                connection_id,
            ),
        )
        .await;
        let reason = match logged_in {
            Err(_) => {
                io.send_final(&err_packet(&errors::read_timeout("connect_timeout"), true))
                    .await;
                tracing::warn!("login took longer than connect_timeout");
                "connect timeout".to_string()
            }
            Ok(Err(LoginError::Packet(error))) => {
                if let Some(answer) = error.answer() {
                    io.send_final(&err_packet(&answer, true)).await;
                }
                if error.is_routine() {
                    tracing::debug!(%error, "client left during login");
                } else {
                    tracing::warn!(%error, "login failed");
                }
                format!("login failed: {error}")
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "login refused");
                format!("login refused: {error}")
            }
            Ok(Ok(login)) => {
                tracing::debug!(
                    user = %login.user,
                    database = ?login.database,
                    program = ?login.attributes.iter().find(|(k, _)| k == "program_name").map(|(_, v)| v),
                    "logged in"
                );
                io.set_limits(shared.config.packet_limits());
                let handler = shared.factory.handler(&login.user, peer);
                let mut session = Session::new(io, handler, login, peer, shared.clone());
                let end = session.run(stop).await;
                session.close().await;
                end.to_string()
            }
        };
        tracing::debug!(%reason, "connection closed");
    }
    .instrument(span)
    .await
}
