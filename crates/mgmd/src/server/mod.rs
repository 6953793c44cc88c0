//! The mgmd server: accepts connections, hands out node ids and start
//! numbers, records node states and which data nodes the operator wants
//! running, owns the schema and the SQL accounts, and arbitrates splits
//! of the data nodes. Its durable state lives in the data dir (`store`:
//! `schema.json`, `starts.json`, `arbitration.json`, `users.json`).
//!
//! Parts: this file holds the shared state and the accept loop;
//! `connection` reads a peer's frames and dispatches them, `registry`
//! registers data nodes and API nodes, `schema` creates and drops tables,
//! `operations` answers status and node commands and arbitrates, `users`
//! keeps the SQL accounts.
//!
//! Invariants:
//! - A node id is held by at most one live connection; closing the
//!   connection frees it (a data node then counts as not started).
//! - Schema changes run one at a time (`Shared::schema_op`). A change is
//!   written to disk before any data node hears of it, and the client is
//!   answered only after every connected data node acknowledged it (a node
//!   that disconnects meanwhile counts as done: it reloads the whole schema
//!   when it registers again).
//! - Registration and event pushes happen under the same state lock, so a
//!   data node either finds a table in its initial schema or receives the
//!   event for it, never neither nor both.
//! - Table ids are never reused: `next_table_id` is persisted with the tables.
//! - A table named `db.t` exists only while SQL database `db` does: it is
//!   created only in an existing database, and dropping a database drops
//!   its tables first (`schema`, `DropDatabase`).
//! - A table and the hidden tables of its unique indexes change on disk
//!   in one write, so the file never holds an index without its hidden
//!   table. A unique index still building belongs to the API connection
//!   that created it: it is dropped if that connection closes first, and
//!   at start (its builder went with the old mgmd).
//! - A data node's incarnation (start number) is on disk before the node
//!   hears it, so no two lives of a node ever get the same number, across
//!   mgmd restarts too. Registrations run one at a time (`starts_op`).
//! - A reattach gives a running data node its id back in the start it
//!   already has, so the start count never moves for it: accepted only for
//!   the node's last recorded start (a process whose id was taken over by
//!   a newer start is refused for good) and while no live session holds
//!   the id. It writes nothing to disk.
//! - The arbitrator grants one side per split, and a grant is on disk
//!   before the winning side hears of it, so a restarted mgmd never grants
//!   the other side (`arbitration_op` serializes requests).
//! - `wanted_running` is the operator's intent, kept in memory only: a
//!   supervisor (`shoal up`) does not restart a data node that is not
//!   wanted. A data node is supervised by at most one API connection.
//! - SQL account changes run one at a time and are on disk before they
//!   are answered or listed; only API nodes may list or change accounts
//!   (they get the password hashes: mgmd trusts API nodes, as with the
//!   schema).
//! - A peer that breaks the protocol (bad JSON, oversized frame) loses its
//!   own connection; nothing else is affected.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use shoal_types::arbitration::{formation_lease_ms, Arbitrator, FormationGate, FORM_VIEW};
use shoal_types::{ErrorCode, SchemaVersion, ShoalError, TableDef, TableId, UniqueIndexDef};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, error, info, warn};

use crate::config::{
    ClusterConfig, DataNodeConfig, KIND_API, KIND_DATANODE, KIND_MGMD, NODE_ID_MAX,
};
use crate::proto::{
    encode_frame, read_frame, ClientFrame, ClusterStatus, MgmEvent, NodeInfo, NodeState,
    NodeStatus, Request, Response, ServerFrame, ServerMessage, VersionProbe, WireError,
    FRAME_BYTES_MAX, PROTOCOL_VERSION,
};

use crate::store::{SchemaFile, Store};
mod connection;
mod operations;
mod registry;
mod schema;
mod unique;
pub(crate) mod users;

use connection::{refuse_connection, serve_connection, ConnHandle};

pub use crate::store::{
    ARBITRATION_FILE, ARBITRATION_FORMAT_VERSION, SCHEMA_FILE, SCHEMA_FORMAT_VERSION, STARTS_FILE,
    STARTS_FORMAT_VERSION, USERS_FILE, USERS_FORMAT_VERSION,
};
pub use schema::{DATABASES_MAX, RESERVED_DATABASES};
pub use users::{
    ACCOUNTS_MAX, ACCOUNTS_PER_REQUEST_MAX, DATABASE_GRANTS_MAX, HOST_BYTES_MAX,
    USER_NAME_CHARS_MAX,
};

/// Most tables the cluster holds (NDB's limit on MaxNoOfTables).
pub const TABLES_MAX: usize = 20_320;
/// Frames queued towards one connection before it counts as stuck and is
/// closed (schema events are rare, so a full queue means a dead peer).
const OUT_QUEUE_FRAMES: usize = 256;
/// How long connections get to finish after shutdown is requested.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// How long a closing connection may take to flush its last frames.
const WRITER_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs mgmd on `listener` until `shutdown` completes. Fails early (before
/// serving) if the config is invalid or the data dir or one of its files
/// cannot be used (the error names the file).
pub async fn run(
    config: ClusterConfig,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), ShoalError> {
    config.validate()?;
    // Held while this mgmd runs: a second mgmd on the same files would
    // hand out the same start numbers and arbitration grants.
    let _dir_lock = crate::dir_lock::DirLock::acquire(
        &config.mgmd_data_dir(),
        "mgmd.lock",
        &format!("mgmd {}", config.mgmd_node().node_id),
    )?;
    let store = Store::open(&config.mgmd_data_dir())?;
    let mut schema = store.load_schema(config.cluster_id)?;
    let repaired = unique::repair_unique_indexes(&mut schema.tables);
    if !repaired.is_empty() {
        warn!(
            dropped = ?repaired,
            "the schema held unique indexes left half made (mgmd stopped during their create, build or drop); dropped them"
        );
        store.save_schema(schema.clone()).await?;
    }
    let starts = store.load_starts(config.cluster_id)?;
    let grant = store.load_arbitration(config.cluster_id)?;
    let users = store.load_users(config.cluster_id)?;
    let local_addr = listener
        .local_addr()
        .map_err(|e| mgmd_err(format!("listener has no local address: {e}")))?;
    info!(
        addr = %local_addr,
        data_dir = %store.dir.display(),
        tables = schema.tables.len(),
        databases = schema.databases.len(),
        next_table_id = schema.next_table_id,
        starts = ?starts,
        arbitration_grant = ?grant,
        sql_accounts = users.len(),
        "mgmd serving"
    );
    let mut tables = BTreeMap::new();
    for t in schema.tables {
        tables.insert(t.name.clone(), t);
    }
    let max_connections = config.mgmd_max_connections as usize;
    // Every data node is wanted until the operator stops it.
    let wanted_running = config
        .data_node_ids()
        .into_iter()
        .map(|id| (id, true))
        .collect();
    let lease_ms = formation_lease_ms(config.heartbeat_interval_ms, config.arbitration_timeout_ms);
    let shared = Arc::new(Shared {
        ack_timeout: Duration::from_millis(config.schema_ack_timeout_ms),
        mgmd_port: local_addr.port(),
        config,
        store,
        schema_op: tokio::sync::Mutex::new(()),
        starts_op: tokio::sync::Mutex::new(()),
        arbitration_op: tokio::sync::Mutex::new(()),
        users: tokio::sync::Mutex::new(users),
        state: Mutex::new(State {
            next_conn_id: 1,
            next_event_id: 1,
            sessions: BTreeMap::new(),
            next_table_id: schema.next_table_id,
            tables,
            databases: schema.databases,
            creating: BTreeSet::new(),
            unique_builds: BTreeMap::new(),
            starts,
            wanted_running,
            arbitrator: Arbitrator::with_grant(grant),
            formation: FormationGate::new(0, lease_ms),
        }),
        started: std::time::Instant::now(),
        stopped: std::sync::atomic::AtomicBool::new(false),
    });

    let (stop_tx, stop_rx) = watch::channel(false);
    let permits = Arc::new(Semaphore::new(max_connections));
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match permits.clone().try_acquire_owned() {
                    Ok(permit) => {
                        conns.spawn(serve_connection(
                            shared.clone(),
                            stream,
                            peer,
                            stop_rx.clone(),
                            permit,
                        ));
                    }
                    Err(_) => {
                        warn!(%peer, max_connections, "refusing connection: mgmd_max_connections reached");
                        conns.spawn(refuse_connection(stream, max_connections));
                    }
                },
                Err(e) => {
                    // Usually out of file descriptors; back off instead of spinning.
                    warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    info!("mgmd shutting down");
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        debug!("aborting connections still busy after the grace period");
        conns.abort_all();
        while conns.join_next().await.is_some() {}
    }
    // A background schema change under way finishes (or, stuck on acks,
    // is given up on); one not begun yet sees the flag and does nothing.
    shared
        .stopped
        .store(true, std::sync::atomic::Ordering::Release);
    if tokio::time::timeout(SHUTDOWN_GRACE, shared.schema_op.lock())
        .await
        .is_err()
    {
        warn!("a background schema change was still waiting for acks at shutdown");
    }
    Ok(())
}

fn mgmd_err(detail: impl Into<String>) -> ShoalError {
    ShoalError::with_detail(ErrorCode::MgmdFailure, detail)
}

// ---------------------------------------------------------------------------
// Shared state

struct Shared {
    config: ClusterConfig,
    /// The port mgmd really listens on (the config may say 0).
    mgmd_port: u16,
    ack_timeout: Duration,
    store: Store,
    /// Held for the whole of a schema change, so changes run one at a time.
    schema_op: tokio::sync::Mutex<()>,
    /// Held for the whole of a data node registration, so start numbers
    /// are bumped and written one at a time (a later write never carries
    /// an older count).
    starts_op: tokio::sync::Mutex<()>,
    /// Held for the whole of an arbitration request: the decision, its
    /// write and its answer happen before the next request is decided.
    arbitration_op: tokio::sync::Mutex<()>,
    /// The SQL accounts, as on disk. Held across a change's write, so
    /// changes run one at a time and a list never sees one not on disk.
    users: tokio::sync::Mutex<users::Accounts>,
    /// Never held across an `.await`.
    state: Mutex<State>,
    /// When this mgmd started (the clock of `State::formation`).
    started: std::time::Instant,
    /// `run` is ending: background schema work (dropping an abandoned
    /// unique index) does nothing more, so no task of this mgmd writes
    /// its files once `run` returned.
    stopped: std::sync::atomic::AtomicBool,
}

struct State {
    next_conn_id: u64,
    next_event_id: u64,
    /// Registered nodes by node id.
    sessions: BTreeMap<u16, Session>,
    next_table_id: u32,
    tables: BTreeMap<String, TableDef>,
    /// SQL databases; every table named `db.t` has its `db` here.
    databases: BTreeSet<String>,
    /// Tables whose creation waits for acks (a table with unique indexes:
    /// until its indexes are in place): data nodes already know them,
    /// clients do not see them yet.
    creating: BTreeSet<String>,
    /// Unique indexes being built, (table, index) → the API connection
    /// building them: if it closes before the build is done, mgmd drops
    /// the index (a half-built index would refuse reads for ever).
    unique_builds: BTreeMap<(String, String), BuildOwner>,
    /// Data node id → registrations so far (the last incarnation handed
    /// out). Never behind `starts.json`.
    starts: BTreeMap<u16, u32>,
    /// Data node id → whether the operator wants it running. Every
    /// configured data node has an entry.
    wanted_running: BTreeMap<u16, bool>,
    /// Mirrors `arbitration.json` (changed only after a successful write).
    arbitrator: Arbitrator,
    /// Initial starts allowed (in memory: after a restart no partial one
    /// is allowed for a while, see `FormationGate`). Its clock is
    /// milliseconds since this mgmd started.
    formation: FormationGate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SessionKind {
    DataNode,
    Api,
}

struct Session {
    conn_id: u64,
    kind: SessionKind,
    peer: SocketAddr,
    state: NodeState,
    status: Option<NodeStatus>,
    /// Encoded frames to the node's writer task.
    out: mpsc::Sender<Vec<u8>>,
    /// Tells the connection task to close (the node stopped reading).
    close: Arc<Notify>,
    /// Events sent and not acknowledged yet. Dropping a sender (node gone)
    /// tells the waiter that the node left.
    pending_acks: HashMap<u64, oneshot::Sender<Result<(), ShoalError>>>,
    /// Data nodes: the incarnation handed out at registration.
    incarnation: u32,
    /// Data nodes: a running node that reattached (mgmd restarted), not
    /// a new registration.
    reattached: bool,
    /// API nodes: the data nodes this connection supervises.
    supervises: BTreeSet<u16>,
}

impl Session {
    /// A data node in a formed cluster, started or still restoring or
    /// copying (what it reported last). A node that reattached after an
    /// mgmd restart counts as one until its first report says otherwise:
    /// it runs, and may be restoring in a cluster formed just before.
    fn in_cluster(&self) -> bool {
        self.state == NodeState::Started
            || match &self.status {
                Some(status) => status.in_cluster,
                None => self.reattached,
            }
    }
}

/// The API connection building a unique index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BuildOwner {
    node_id: u16,
    conn_id: u64,
}

/// What a data node learns when it registers.
struct Registered {
    node_id: u16,
    incarnation: u32,
    config: DataNodeConfig,
    tables: Vec<TableDef>,
}

fn id_in_use(node_id: u16, peer: SocketAddr) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::NodeIdRefused,
        format!("node id {node_id} is already in use (connected from {peer})"),
    )
}

/// One pushed event whose ack is awaited.
struct AckWait {
    node_id: u16,
    event_id: u64,
    rx: oneshot::Receiver<Result<(), ShoalError>>,
}

impl State {
    /// The API node supervising data node `node_id`, if any.
    fn supervisor_of(&self, node_id: u16) -> Option<u16> {
        self.sessions
            .iter()
            .find(|(_, s)| s.kind == SessionKind::Api && s.supervises.contains(&node_id))
            .map(|(&id, _)| id)
    }

    fn is_connected_data_node(&self, node_id: u16) -> bool {
        self.sessions
            .get(&node_id)
            .is_some_and(|s| s.kind == SessionKind::DataNode)
    }

    fn schema_file(&self, cluster_id: u64) -> SchemaFile {
        let mut tables: Vec<TableDef> = self.tables.values().cloned().collect();
        tables.sort_by_key(|t| t.id);
        SchemaFile {
            format_version: SCHEMA_FORMAT_VERSION,
            cluster_id,
            next_table_id: self.next_table_id,
            tables,
            databases: self.databases.clone(),
        }
    }

    /// Sends `event` to data node `node_id` and registers the ack waiter.
    /// `None` if the node is not connected or its queue is stuck (then its
    /// connection is told to close, which counts as the node leaving).
    fn push_event(&mut self, node_id: u16, event: &MgmEvent) -> Option<AckWait> {
        let event_id = self.next_event_id;
        self.next_event_id += 1;
        let session = self.sessions.get_mut(&node_id)?;
        assert_eq!(
            session.kind,
            SessionKind::DataNode,
            "events go to data nodes only"
        );
        let frame = encode_frame(&ServerFrame {
            v: PROTOCOL_VERSION,
            msg: ServerMessage::Event {
                event_id,
                event: event.clone(),
            },
        });
        let frame = match frame {
            Ok(f) => f,
            Err(e) => {
                // A table definition too large for a frame: the create was
                // validated, so this is a bug, but do not take mgmd down.
                error!(node_id, "cannot encode event: {e}");
                return None;
            }
        };
        if let Err(e) = session.out.try_send(frame) {
            warn!(
                node_id,
                "cannot queue event to data node ({e}); closing its connection"
            );
            session.close.notify_one();
            return None;
        }
        let (tx, rx) = oneshot::channel();
        session.pending_acks.insert(event_id, tx);
        Some(AckWait {
            node_id,
            event_id,
            rx,
        })
    }

    fn push_to_all_data_nodes(&mut self, event: &MgmEvent) -> Vec<AckWait> {
        let ids: Vec<u16> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.kind == SessionKind::DataNode)
            .map(|(&id, _)| id)
            .collect();
        ids.into_iter()
            .filter_map(|id| self.push_event(id, event))
            .collect()
    }
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock is a bug that already failed loudly;
        // the state itself stays consistent (no multi-step updates span a
        // panic point), so keep serving.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
