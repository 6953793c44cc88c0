//! The mgmd server: accepts connections, hands out node ids and start
//! numbers, records node states and which data nodes the operator wants
//! running, owns the schema, and arbitrates splits of the data nodes. Its
//! durable state lives in the data dir (`store`: `schema.json`,
//! `starts.json`, `arbitration.json`).
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
//! - A peer that breaks the protocol (bad JSON, oversized frame) loses its
//!   own connection; nothing else is affected.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use shoal_types::arbitration::Arbitrator;
use shoal_types::{ErrorCode, SchemaVersion, ShoalError, TableDef, TableId};
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
pub use crate::store::{
    ARBITRATION_FILE, ARBITRATION_FORMAT_VERSION, SCHEMA_FILE, SCHEMA_FORMAT_VERSION, STARTS_FILE,
    STARTS_FORMAT_VERSION,
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
    let store = Store::open(&config.mgmd_data_dir())?;
    let schema = store.load_schema(config.cluster_id)?;
    let starts = store.load_starts(config.cluster_id)?;
    let grant = store.load_arbitration(config.cluster_id)?;
    let local_addr = listener
        .local_addr()
        .map_err(|e| mgmd_err(format!("listener has no local address: {e}")))?;
    info!(
        addr = %local_addr,
        data_dir = %store.dir.display(),
        tables = schema.tables.len(),
        next_table_id = schema.next_table_id,
        starts = ?starts,
        arbitration_grant = ?grant,
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
    let shared = Arc::new(Shared {
        ack_timeout: Duration::from_millis(config.schema_ack_timeout_ms),
        mgmd_port: local_addr.port(),
        config,
        store,
        schema_op: tokio::sync::Mutex::new(()),
        starts_op: tokio::sync::Mutex::new(()),
        arbitration_op: tokio::sync::Mutex::new(()),
        state: Mutex::new(State {
            next_conn_id: 1,
            next_event_id: 1,
            sessions: BTreeMap::new(),
            next_table_id: schema.next_table_id,
            tables,
            creating: None,
            starts,
            wanted_running,
            arbitrator: Arbitrator::with_grant(grant),
        }),
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
    /// Never held across an `.await`.
    state: Mutex<State>,
}

struct State {
    next_conn_id: u64,
    next_event_id: u64,
    /// Registered nodes by node id.
    sessions: BTreeMap<u16, Session>,
    next_table_id: u32,
    tables: BTreeMap<String, TableDef>,
    /// A table whose creation waits for acks: data nodes already know it,
    /// clients do not see it yet.
    creating: Option<String>,
    /// Data node id → registrations so far (the last incarnation handed
    /// out). Never behind `starts.json`.
    starts: BTreeMap<u16, u32>,
    /// Data node id → whether the operator wants it running. Every
    /// configured data node has an entry.
    wanted_running: BTreeMap<u16, bool>,
    /// Mirrors `arbitration.json` (changed only after a successful write).
    arbitrator: Arbitrator,
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
    /// API nodes: the data nodes this connection supervises.
    supervises: BTreeSet<u16>,
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
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock is a bug that already failed loudly;
        // the state itself stays consistent (no multi-step updates span a
        // panic point), so keep serving.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a data node: picks its id, bumps and persists its start
    /// number, then enters the session. The session appears only once the
    /// start number is durable, so nobody sees an incarnation that a crash
    /// could hand out again.
    async fn register_data_node(
        &self,
        requested: Option<u16>,
        conn: &ConnHandle,
    ) -> Result<Registered, ShoalError> {
        let ids = self.config.data_node_ids();
        let list = ids
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let _op = self.starts_op.lock().await;
        let (node_id, incarnation, starts) = {
            let mut st = self.lock();
            let node_id = match requested {
                Some(id) => {
                    if !ids.contains(&id) {
                        return Err(ShoalError::with_detail(
                            ErrorCode::NodeIdRefused,
                            format!(
                                "node id {id} is not a data node in the config; configured data node ids: {list}"
                            ),
                        ));
                    }
                    if let Some(s) = st.sessions.get(&id) {
                        return Err(id_in_use(id, s.peer));
                    }
                    id
                }
                None => *ids
                    .iter()
                    .find(|id| !st.sessions.contains_key(id))
                    .ok_or_else(|| {
                        ShoalError::with_detail(
                            ErrorCode::NodeIdRefused,
                            format!("all data node ids ({list}) are in use"),
                        )
                    })?,
            };
            let previous = st.starts.get(&node_id).copied().unwrap_or(0);
            let incarnation = previous.checked_add(1).ok_or_else(|| {
                mgmd_err(format!(
                    "data node {node_id} has registered {previous} times, the most a start number counts"
                ))
            })?;
            // Bumped in memory before the write: if the write fails the
            // number is skipped, never reused.
            st.starts.insert(node_id, incarnation);
            (node_id, incarnation, st.starts.clone())
        };
        if let Err(e) = self.store.save_starts(self.config.cluster_id, starts).await {
            error!(
                node_id,
                "cannot persist the start number, refusing the registration: {e}"
            );
            return Err(e);
        }
        let config = self
            .config
            .data_node_config(node_id)
            .expect("id is a configured data node");
        let mut st = self.lock();
        // Only API registrations ran meanwhile, and they never take a data
        // node id; checked anyway rather than trusted.
        if let Some(s) = st.sessions.get(&node_id) {
            return Err(id_in_use(node_id, s.peer));
        }
        let mut tables: Vec<TableDef> = st.tables.values().cloned().collect();
        tables.sort_by_key(|t| t.id);
        let mut session = conn.session(SessionKind::DataNode);
        session.incarnation = incarnation;
        st.sessions.insert(node_id, session);
        Ok(Registered {
            node_id,
            incarnation,
            config,
            tables,
        })
    }

    /// Takes a running data node back after its session broke: same node
    /// id, same start. Nothing is written: the start is already on disk
    /// (it was handed out only after it was). Refusals that can never turn
    /// into an acceptance are `HandshakeRejected`; a live session holding
    /// the id (mgmd has not yet seen the node's old connection close) is
    /// `NodeIdRefused`, worth retrying.
    fn reattach_data_node(
        &self,
        node_id: u16,
        incarnation: u32,
        cluster_id: u64,
        conn: &ConnHandle,
    ) -> Result<Registered, ShoalError> {
        let refuse = |why: String| {
            ShoalError::with_detail(
                ErrorCode::HandshakeRejected,
                format!("data node {node_id} (start {incarnation}) cannot reattach: {why}"),
            )
        };
        if cluster_id != self.config.cluster_id {
            return Err(refuse(format!(
                "it belongs to cluster {cluster_id}, this mgmd serves cluster {}",
                self.config.cluster_id
            )));
        }
        if incarnation == 0 {
            return Err(refuse(
                "start numbers begin at 1; register the node instead".into(),
            ));
        }
        let Some(config) = self.config.data_node_config(node_id) else {
            let list = self
                .config
                .data_node_ids()
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(refuse(format!(
                "{node_id} is not a data node in the config; configured data node ids: {list}"
            )));
        };
        // No need for `starts_op`: a registration bumps the count in
        // memory before anyone hears the new number, so under this lock
        // either the bump is visible (the reattach is refused as stale) or
        // the session entered here makes the registration find the id in
        // use.
        let mut st = self.lock();
        let last = st.starts.get(&node_id).copied().unwrap_or(0);
        if incarnation != last {
            return Err(if incarnation < last {
                refuse(format!(
                    "node {node_id} has started again since (start {last}); this process is \
                     stale and must not act as node {node_id}"
                ))
            } else {
                refuse(format!(
                    "mgmd has recorded only {last} start(s) of node {node_id} (was mgmd's data \
                     dir replaced?); restart the node to register it anew"
                ))
            });
        }
        if let Some(s) = st.sessions.get(&node_id) {
            return Err(id_in_use(node_id, s.peer));
        }
        // The table snapshot and the session enter under one lock, like a
        // registration: every later schema event reaches this session.
        let mut tables: Vec<TableDef> = st.tables.values().cloned().collect();
        tables.sort_by_key(|t| t.id);
        let mut session = conn.session(SessionKind::DataNode);
        session.incarnation = incarnation;
        st.sessions.insert(node_id, session);
        Ok(Registered {
            node_id,
            incarnation,
            config,
            tables,
        })
    }

    fn register_api(&self, conn: &ConnHandle) -> Result<u16, ShoalError> {
        let mut api_ids: Vec<u16> = self
            .config
            .nodes
            .iter()
            .filter(|n| n.kind == KIND_API)
            .map(|n| n.node_id)
            .collect();
        api_ids.sort_unstable();
        let mut st = self.lock();
        let node_id = if api_ids.is_empty() {
            let first = self
                .config
                .nodes
                .iter()
                .map(|n| n.node_id)
                .max()
                .unwrap_or(0)
                .saturating_add(1);
            (first..=crate::config::NODE_ID_MAX)
                .find(|id| !st.sessions.contains_key(id))
                .ok_or_else(|| {
                    ShoalError::with_detail(
                        ErrorCode::NodeIdRefused,
                        format!(
                            "no free API node id: ids {first}..={} are all in use",
                            crate::config::NODE_ID_MAX
                        ),
                    )
                })?
        } else {
            *api_ids
                .iter()
                .find(|id| !st.sessions.contains_key(id))
                .ok_or_else(|| {
                    ShoalError::with_detail(
                        ErrorCode::NodeIdRefused,
                        format!(
                            "no free API node id: all {} [[node]] type = \"api\" ids are in use",
                            api_ids.len()
                        ),
                    )
                })?
        };
        st.sessions.insert(node_id, conn.session(SessionKind::Api));
        Ok(node_id)
    }

    /// Frees the node id if this connection still holds it.
    fn deregister(&self, node_id: u16, conn_id: u64) {
        let mut st = self.lock();
        if st.sessions.get(&node_id).map(|s| s.conn_id) == Some(conn_id) {
            let s = st.sessions.remove(&node_id).expect("present");
            info!(node_id, peer = %s.peer, kind = ?s.kind, "node disconnected; id is free again");
            if !s.supervises.is_empty() {
                warn!(
                    supervisor = node_id,
                    nodes = ?s.supervises,
                    "supervisor disconnected; these data nodes are no longer restarted when they exit"
                );
            }
        }
    }

    fn status(&self) -> ClusterStatus {
        let st = self.lock();
        let groups = self.config.node_groups();
        // Primary replicas per node, over every table's fragments.
        let mut primaries: HashMap<u16, u32> = HashMap::new();
        for t in st.tables.values() {
            if let Some(Ok(map)) = t.distribution.as_ref().map(|d| d.map()) {
                for f in &map.fragments {
                    *primaries.entry(f.replicas[0]).or_default() += 1;
                }
            }
        }
        let mut nodes = Vec::new();
        for n in &self.config.nodes {
            let session = st.sessions.get(&n.node_id);
            let info = match n.kind.as_str() {
                KIND_MGMD => NodeInfo {
                    node_id: n.node_id,
                    kind: n.kind.clone(),
                    host: n.host.clone(),
                    port: self.mgmd_port,
                    state: NodeState::Started,
                    status: None,
                    primaries: 0,
                    node_group: None,
                    incarnation: 0,
                    wanted_running: false,
                    supervised: false,
                },
                KIND_DATANODE => {
                    let status = session.and_then(|s| s.status.clone());
                    let port = match &status {
                        Some(s) if s.listen_port != 0 => s.listen_port,
                        _ => n.port,
                    };
                    NodeInfo {
                        node_id: n.node_id,
                        kind: n.kind.clone(),
                        host: n.host.clone(),
                        port,
                        state: session.map_or(NodeState::NotStarted, |s| s.state),
                        status,
                        primaries: primaries.get(&n.node_id).copied().unwrap_or(0),
                        node_group: groups
                            .iter()
                            .position(|g| g.contains(&n.node_id))
                            .map(|g| g as u16),
                        incarnation: session.map_or_else(
                            || st.starts.get(&n.node_id).copied().unwrap_or(0),
                            |s| s.incarnation,
                        ),
                        wanted_running: st.wanted_running.get(&n.node_id).copied().unwrap_or(true),
                        supervised: st.supervisor_of(n.node_id).is_some(),
                    }
                }
                _ => NodeInfo {
                    node_id: n.node_id,
                    kind: n.kind.clone(),
                    host: session.map_or_else(|| n.host.clone(), |s| s.peer.ip().to_string()),
                    port: 0,
                    state: if session.is_some() {
                        NodeState::Started
                    } else {
                        NodeState::NotStarted
                    },
                    status: None,
                    primaries: 0,
                    node_group: None,
                    incarnation: 0,
                    wanted_running: false,
                    supervised: false,
                },
            };
            nodes.push(info);
        }
        // API nodes with ids outside any [[node]] section.
        for (&id, s) in &st.sessions {
            if s.kind == SessionKind::Api && !self.config.nodes.iter().any(|n| n.node_id == id) {
                nodes.push(NodeInfo {
                    node_id: id,
                    kind: KIND_API.to_string(),
                    host: s.peer.ip().to_string(),
                    port: 0,
                    state: NodeState::Started,
                    status: None,
                    primaries: 0,
                    node_group: None,
                    incarnation: 0,
                    wanted_running: false,
                    supervised: false,
                });
            }
        }
        nodes.sort_by_key(|n| n.node_id);
        ClusterStatus {
            cluster_id: self.config.cluster_id,
            no_of_replicas: self.config.no_of_replicas,
            nodes,
        }
    }

    /// Waits for every ack with one common deadline. The first failure
    /// wins: a node's error (prefixed with the node) or a timeout naming the
    /// node. A node that disconnected counts as done.
    async fn await_acks(&self, waits: Vec<AckWait>, what: &str) -> Result<(), ShoalError> {
        let deadline = tokio::time::Instant::now() + self.ack_timeout;
        let mut outcome = Ok(());
        let mut unfinished = Vec::new();
        for w in waits {
            if outcome.is_err() {
                unfinished.push((w.node_id, w.event_id));
                continue;
            }
            match tokio::time::timeout_at(deadline, w.rx).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => {
                    warn!(node_id = w.node_id, "data node failed {what}: {e}");
                    outcome = Err(ShoalError::with_detail(
                        e.code,
                        format!("data node {} failed {what}: {}", w.node_id, e.detail),
                    ));
                }
                Ok(Err(_)) => {
                    info!(
                        node_id = w.node_id,
                        "data node disconnected before acknowledging {what}; it reloads the schema when it registers again"
                    );
                }
                Err(_) => {
                    warn!(
                        node_id = w.node_id,
                        "data node did not acknowledge {what} in time"
                    );
                    unfinished.push((w.node_id, w.event_id));
                    outcome = Err(mgmd_err(format!(
                        "data node {} did not acknowledge {what} within {} ms",
                        w.node_id,
                        self.ack_timeout.as_millis()
                    )));
                }
            }
        }
        if !unfinished.is_empty() {
            // Forget waiters nobody listens to any more, so a node that
            // never answers cannot grow the map.
            let mut st = self.lock();
            for (node_id, event_id) in unfinished {
                if let Some(s) = st.sessions.get_mut(&node_id) {
                    s.pending_acks.remove(&event_id);
                }
            }
        }
        outcome
    }

    async fn create_table(&self, mut def: TableDef) -> Result<TableDef, ShoalError> {
        // Where the table lives is mgmd's decision, not the client's.
        def.distribution = Some(self.config.table_distribution(def.options.fragment_count)?);
        def.validate()?;
        let _op = self.schema_op.lock().await;
        let file = {
            let st = self.lock();
            if st.tables.contains_key(&def.name) {
                return Err(ShoalError::with_detail(
                    ErrorCode::TableExists,
                    format!("table `{}` already exists", def.name),
                ));
            }
            if st.tables.len() >= TABLES_MAX {
                return Err(ShoalError::with_detail(
                    ErrorCode::RequestTooLarge,
                    format!("the cluster already holds {TABLES_MAX} tables, the most it can"),
                ));
            }
            def.id = TableId(st.next_table_id);
            def.version = SchemaVersion(1);
            let mut file = st.schema_file(self.config.cluster_id);
            file.next_table_id = st
                .next_table_id
                .checked_add(1)
                .ok_or_else(|| mgmd_err("table ids exhausted"))?;
            file.tables.push(def.clone());
            file
        };
        // Durable before any node hears of it: a node must never hold a
        // table that mgmd forgets after a crash.
        self.store.save_schema(file).await?;
        let waits = {
            let mut st = self.lock();
            st.next_table_id += 1;
            st.tables.insert(def.name.clone(), def.clone());
            st.creating = Some(def.name.clone());
            st.push_to_all_data_nodes(&MgmEvent::TableCreated(def.clone()))
        };
        info!(table = %def.name, id = %def.id, nodes = waits.len(), "creating table");
        let what = format!("creating table `{}`", def.name);
        match self.await_acks(waits, &what).await {
            Ok(()) => {
                self.lock().creating = None;
                info!(table = %def.name, id = %def.id, "table created");
                Ok(def)
            }
            Err(e) => {
                // Roll back so the cluster does not keep a table that some
                // node lacks. The id stays used (ids are never reused).
                warn!(table = %def.name, "create failed, rolling back: {e}");
                let (file, waits) = {
                    let mut st = self.lock();
                    st.tables.remove(&def.name);
                    st.creating = None;
                    let waits = st.push_to_all_data_nodes(&MgmEvent::TableDropped { id: def.id });
                    (st.schema_file(self.config.cluster_id), waits)
                };
                if let Err(pe) = self.store.save_schema(file).await {
                    error!(table = %def.name, "cannot persist rollback of create: {pe}");
                }
                let what = format!("rolling back table `{}`", def.name);
                if let Err(re) = self.await_acks(waits, &what).await {
                    warn!("{re}");
                }
                Err(e)
            }
        }
    }

    async fn drop_table(&self, name: &str) -> Result<(), ShoalError> {
        let _op = self.schema_op.lock().await;
        let (def, waits) = {
            let mut st = self.lock();
            let def = st.tables.remove(name).ok_or_else(|| no_such_table(name))?;
            let waits = st.push_to_all_data_nodes(&MgmEvent::TableDropped { id: def.id });
            (def, waits)
        };
        info!(table = %def.name, id = %def.id, nodes = waits.len(), "dropping table");
        // The drop is decided once pushed: a node that fails it is reported
        // to the caller, but the table stays dropped (its data may already
        // be gone on other nodes).
        let acks = self
            .await_acks(waits, &format!("dropping table `{name}`"))
            .await;
        let file = self.lock().schema_file(self.config.cluster_id);
        self.store.save_schema(file).await?;
        info!(table = %def.name, "table dropped");
        acks
    }

    fn get_table(&self, name: &str) -> Result<TableDef, ShoalError> {
        let st = self.lock();
        if st.creating.as_deref() == Some(name) {
            return Err(no_such_table(name));
        }
        st.tables
            .get(name)
            .cloned()
            .ok_or_else(|| no_such_table(name))
    }

    fn list_tables(&self) -> Vec<TableDef> {
        let st = self.lock();
        let mut tables: Vec<TableDef> = st
            .tables
            .values()
            .filter(|t| st.creating.as_deref() != Some(t.name.as_str()))
            .cloned()
            .collect();
        tables.sort_by_key(|t| t.id);
        tables
    }

    /// Refuses a node id that is not a data node of the config.
    fn check_data_node_id(&self, node_id: u16) -> Result<(), ShoalError> {
        let ids = self.config.data_node_ids();
        if ids.contains(&node_id) {
            return Ok(());
        }
        let list = ids
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Err(ShoalError::with_detail(
            ErrorCode::BadRequest,
            format!("node {node_id} is not a data node in the config; data node ids: {list}"),
        ))
    }

    /// "host:port" that a data node started by hand should connect to.
    fn connect_string(&self) -> String {
        format!("{}:{}", self.config.mgmd_node().host, self.mgmd_port)
    }

    /// `N stop`: not wanted any more (its supervisor keeps it down), then
    /// stopped if it runs. A node that is not connected stays down.
    async fn stop_node(&self, node_id: u16) -> Result<(), ShoalError> {
        self.check_data_node_id(node_id)?;
        let wait = {
            let mut st = self.lock();
            // Before the push: a supervisor that sees the node exit must
            // already find it unwanted, or it would start it again.
            st.wanted_running.insert(node_id, false);
            if st.is_connected_data_node(node_id) {
                st.push_event(node_id, &MgmEvent::Shutdown)
            } else {
                None
            }
        };
        info!(
            node_id,
            running = wait.is_some(),
            "data node wanted stopped; asking it to stop"
        );
        self.await_acks(wait.into_iter().collect(), "stopping")
            .await
    }

    /// `N start`: wanted again. Only a supervisor can start a process, so
    /// without one the operator is told how to start it by hand.
    fn start_node(&self, node_id: u16) -> Result<(), ShoalError> {
        self.check_data_node_id(node_id)?;
        let mut st = self.lock();
        st.wanted_running.insert(node_id, true);
        let running = st.is_connected_data_node(node_id);
        let supervisor = st.supervisor_of(node_id);
        drop(st);
        info!(node_id, running, supervisor, "data node wanted running");
        if running || supervisor.is_some() {
            return Ok(());
        }
        Err(ShoalError::with_detail(
            ErrorCode::NodeNotReady,
            format!(
                "data node {node_id} is wanted running again, but no supervisor (shoal up) covers it, \
                 so nothing will start it: start it by hand with \
                 `shoal datanode --connect {} --node-id {node_id}`",
                self.connect_string()
            ),
        ))
    }

    /// `N restart`: stop a supervised node and let its supervisor start it
    /// again. Refused without a supervisor: the node would stop and stay
    /// down.
    async fn restart_node(&self, node_id: u16) -> Result<(), ShoalError> {
        self.check_data_node_id(node_id)?;
        let (wait, supervisor) = {
            let mut st = self.lock();
            let Some(supervisor) = st.supervisor_of(node_id) else {
                return Err(ShoalError::with_detail(
                    ErrorCode::BadRequest,
                    format!(
                        "data node {node_id} has no supervisor (shoal up), so after stopping \
                         nothing would start it again; restart it by hand: `shoal mgm -e \"{node_id} stop\"`, \
                         then `shoal datanode --connect {} --node-id {node_id}`",
                        self.connect_string()
                    ),
                ));
            };
            if !st.is_connected_data_node(node_id) {
                // Down (then `N start` is what the operator wants) or
                // running without a link to mgmd: either way mgmd cannot
                // ask it to stop.
                return Err(ShoalError::with_detail(
                    ErrorCode::NodeNotReady,
                    format!(
                        "data node {node_id} is not connected to mgmd, so it cannot be asked to \
                         stop; if it is down, `{node_id} start` starts it"
                    ),
                ));
            }
            st.wanted_running.insert(node_id, true);
            (st.push_event(node_id, &MgmEvent::Shutdown), supervisor)
        };
        info!(
            node_id,
            supervisor, "restarting data node: asking it to stop, its supervisor starts it again"
        );
        self.await_acks(wait.into_iter().collect(), "stopping for a restart")
            .await
    }

    /// API node `api_id` supervises `nodes` (replacing its earlier list).
    fn supervise(&self, api_id: u16, nodes: Vec<u16>) -> Result<(), ShoalError> {
        // Checked before the loop below walks it: a frame may hold millions.
        if nodes.len() > usize::from(NODE_ID_MAX) {
            return Err(ShoalError::with_detail(
                ErrorCode::BadRequest,
                format!(
                    "supervise lists {} nodes; a cluster has at most {NODE_ID_MAX}",
                    nodes.len()
                ),
            ));
        }
        let nodes: BTreeSet<u16> = nodes.into_iter().collect();
        for &n in &nodes {
            self.check_data_node_id(n)?;
        }
        let mut st = self.lock();
        for &n in &nodes {
            if let Some(other) = st.supervisor_of(n).filter(|&o| o != api_id) {
                // Two supervisors would race to start the same node id.
                return Err(ShoalError::with_detail(
                    ErrorCode::BadRequest,
                    format!("data node {n} is already supervised by API node {other}"),
                ));
            }
        }
        let session = st
            .sessions
            .get_mut(&api_id)
            .expect("a registered API connection has a session");
        info!(supervisor = api_id, nodes = ?nodes, "supervisor registered");
        session.supervises = nodes;
        Ok(())
    }

    /// Data node `asker` asks whether its side of a split may survive.
    async fn arbitrate(
        &self,
        asker: u16,
        view: u64,
        survivors: Vec<u16>,
    ) -> Result<bool, ShoalError> {
        if survivors.len() > usize::from(NODE_ID_MAX) {
            return Err(ShoalError::with_detail(
                ErrorCode::BadRequest,
                format!(
                    "arbitration request lists {} survivors; a cluster has at most {NODE_ID_MAX}",
                    survivors.len()
                ),
            ));
        }
        let survivors: BTreeSet<u16> = survivors.into_iter().collect();
        for &n in &survivors {
            self.check_data_node_id(n)?;
        }
        if !survivors.contains(&asker) {
            return Err(ShoalError::with_detail(
                ErrorCode::BadRequest,
                format!(
                    "data node {asker} asks for survivors {survivors:?} without itself; \
                     a node asks only for its own side"
                ),
            ));
        }
        let _op = self.arbitration_op.lock().await;
        // Decided on a copy, committed only once durable: a grant that
        // failed to reach the disk must not be remembered either.
        let (granted, changed) = {
            let st = self.lock();
            let mut arbitrator = st.arbitrator.clone();
            let granted = arbitrator.request(view, &survivors);
            let changed = (arbitrator.grant() != st.arbitrator.grant()).then_some(arbitrator);
            (granted, changed)
        };
        if let Some(arbitrator) = changed {
            let grant = arbitrator
                .grant()
                .expect("a changed arbitrator holds a grant");
            if let Err(e) = self
                .store
                .save_arbitration(self.config.cluster_id, grant)
                .await
            {
                // No answer means shut down for the asking side; an error
                // is the same, and the other side may still be granted.
                error!(view, survivors = ?survivors, asker, "cannot persist the arbitration grant, not granting: {e}");
                return Err(e);
            }
            self.lock().arbitrator = arbitrator;
        }
        if granted {
            info!(view, survivors = ?survivors, asker, "arbitration: survival granted");
        } else {
            let winner = self.lock().arbitrator.grant().cloned();
            warn!(
                view,
                survivors = ?survivors,
                asker,
                granted_view = winner.as_ref().map(|g| g.view),
                granted_survivors = ?winner.map(|g| g.survivors),
                "arbitration: survival refused (another side already won)"
            );
        }
        Ok(granted)
    }

    fn report_status(&self, node_id: u16, conn_id: u64, status: NodeStatus) {
        let mut st = self.lock();
        if let Some(s) = st.sessions.get_mut(&node_id) {
            if s.conn_id == conn_id {
                if s.state != status.state {
                    info!(
                        node_id,
                        from = s.state.as_str(),
                        to = status.state.as_str(),
                        "data node state"
                    );
                }
                s.state = status.state;
                s.status = Some(status);
            }
        }
    }

    fn ack_event(&self, node_id: u16, event_id: u64, result: Result<(), ShoalError>) {
        let mut st = self.lock();
        let waiter = st
            .sessions
            .get_mut(&node_id)
            .and_then(|s| s.pending_acks.remove(&event_id));
        match waiter {
            Some(tx) => {
                let _ = tx.send(result);
            }
            None => debug!(node_id, event_id, "late or unknown event ack ignored"),
        }
    }
}

fn no_such_table(name: &str) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::NoSuchTable,
        format!("table `{name}` does not exist"),
    )
}

// ---------------------------------------------------------------------------
// Connections

/// What a connection task hands to the registry when it registers.
struct ConnHandle {
    conn_id: u64,
    peer: SocketAddr,
    out: mpsc::Sender<Vec<u8>>,
    close: Arc<Notify>,
}

impl ConnHandle {
    fn session(&self, kind: SessionKind) -> Session {
        Session {
            conn_id: self.conn_id,
            kind,
            peer: self.peer,
            state: match kind {
                SessionKind::DataNode => NodeState::Starting,
                SessionKind::Api => NodeState::Started,
            },
            status: None,
            out: self.out.clone(),
            close: self.close.clone(),
            pending_acks: HashMap::new(),
            incarnation: 0,
            supervises: BTreeSet::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Unregistered,
    DataNode(u16),
    Api(u16),
}

struct Connection {
    shared: Arc<Shared>,
    handle: ConnHandle,
    role: Role,
}

async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    mut stop: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    let (rd, wr) = stream.into_split();
    let (out_tx, out_rx) = mpsc::channel(OUT_QUEUE_FRAMES);
    let writer = tokio::spawn(write_loop(wr, out_rx));
    let conn_id = {
        let mut st = shared.lock();
        let id = st.next_conn_id;
        st.next_conn_id += 1;
        id
    };
    debug!(%peer, conn_id, "connection accepted");
    let close = Arc::new(Notify::new());
    let mut conn = Connection {
        shared,
        handle: ConnHandle {
            conn_id,
            peer,
            out: out_tx,
            close: close.clone(),
        },
        role: Role::Unregistered,
    };
    let mut rd = BufReader::new(rd);
    if !*stop.borrow_and_update() {
        loop {
            let frame = tokio::select! {
                r = read_frame(&mut rd, FRAME_BYTES_MAX) => r,
                _ = stop.changed() => break,
                _ = close.notified() => {
                    warn!(%peer, "closing connection: peer is not reading its events");
                    break;
                }
            };
            match frame {
                Ok(None) => {
                    debug!(%peer, "peer closed the connection");
                    break;
                }
                Err(e) => {
                    warn!(%peer, "closing connection: {e}");
                    break;
                }
                Ok(Some(body)) => {
                    if let Err(reason) = conn.handle_frame(&body).await {
                        warn!(%peer, "closing connection: {reason}");
                        break;
                    }
                }
            }
        }
    }
    match conn.role {
        Role::DataNode(id) | Role::Api(id) => conn.shared.deregister(id, conn_id),
        Role::Unregistered => {}
    }
    // Dropping the last sender lets the writer flush what is queued and end.
    drop(conn);
    let mut writer = writer;
    if tokio::time::timeout(WRITER_FLUSH_TIMEOUT, &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
}

async fn write_loop(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Vec<u8>>) {
    while let Some(frame) = rx.recv().await {
        if let Err(e) = wr.write_all(&frame).await {
            debug!("write to peer failed: {e}");
            return;
        }
    }
    let _ = wr.shutdown().await;
}

/// Answers a connection over the limit with an error frame and closes it.
async fn refuse_connection(mut stream: TcpStream, max_connections: usize) {
    let err = mgmd_err(format!(
        "mgmd refuses the connection: mgmd_max_connections = {max_connections} reached"
    ));
    let frame = encode_frame(&ServerFrame {
        v: PROTOCOL_VERSION,
        msg: ServerMessage::Response {
            id: 0,
            response: Response::Error(WireError::from(&err)),
        },
    })
    .expect("small frame encodes");
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&frame).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

impl Connection {
    /// Queues an answer. Err = the writer is gone (close the connection).
    async fn respond(&self, id: u64, response: Response) -> Result<(), String> {
        let frame = match encode_frame(&ServerFrame {
            v: PROTOCOL_VERSION,
            msg: ServerMessage::Response { id, response },
        }) {
            Ok(f) => f,
            Err(e) => {
                // An answer too big for a frame (a huge table list): tell the
                // client rather than dropping the connection.
                let small = ServerFrame {
                    v: PROTOCOL_VERSION,
                    msg: ServerMessage::Response {
                        id,
                        response: Response::Error(WireError::from(&e)),
                    },
                };
                encode_frame(&small).map_err(|e| e.to_string())?
            }
        };
        self.handle
            .out
            .send(frame)
            .await
            .map_err(|_| "writer task ended".to_string())
    }

    async fn respond_result(
        &self,
        id: u64,
        result: Result<Response, ShoalError>,
    ) -> Result<(), String> {
        let response = match result {
            Ok(r) => r,
            Err(e) => Response::Error(WireError::from(&e)),
        };
        self.respond(id, response).await
    }

    /// Handles one frame. Err(reason) = the peer broke the protocol and the
    /// connection must be closed.
    async fn handle_frame(&mut self, body: &[u8]) -> Result<(), String> {
        let probe: VersionProbe =
            serde_json::from_slice(body).map_err(|e| format!("malformed frame: {e}"))?;
        if probe.v != PROTOCOL_VERSION {
            let err = ShoalError::with_detail(
                ErrorCode::HandshakeRejected,
                format!(
                    "mgmd protocol version {} is not supported; this mgmd speaks version {PROTOCOL_VERSION}",
                    probe.v
                ),
            );
            self.respond(0, Response::Error(WireError::from(&err)))
                .await?;
            return Err(format!("protocol version {} refused", probe.v));
        }
        let frame: ClientFrame =
            serde_json::from_slice(body).map_err(|e| format!("malformed request: {e}"))?;
        let id = frame.id;
        let shared = self.shared.clone();
        match frame.request {
            Request::Show => self.respond(id, Response::Status(shared.status())).await,
            Request::RegisterDataNode { node_id } => {
                let result = match self.role {
                    Role::Unregistered => shared
                        .register_data_node(node_id, &self.handle)
                        .await
                        .map(|r| {
                            self.role = Role::DataNode(r.node_id);
                            info!(
                                node_id = r.node_id,
                                incarnation = r.incarnation,
                                peer = %self.handle.peer,
                                tables = r.tables.len(),
                                "data node registered"
                            );
                            Response::DataNodeRegistered {
                                node_id: r.node_id,
                                cluster_id: shared.config.cluster_id,
                                config: r.config,
                                tables: r.tables,
                                incarnation: r.incarnation,
                            }
                        }),
                    role => Err(already_registered(role)),
                };
                self.respond_result(id, result).await
            }
            Request::ReattachDataNode {
                node_id,
                incarnation,
                cluster_id,
            } => {
                let result = match self.role {
                    Role::Unregistered => shared
                        .reattach_data_node(node_id, incarnation, cluster_id, &self.handle)
                        .map(|r| {
                            self.role = Role::DataNode(r.node_id);
                            info!(
                                node_id = r.node_id,
                                incarnation = r.incarnation,
                                peer = %self.handle.peer,
                                tables = r.tables.len(),
                                "data node reattached (same start)"
                            );
                            Response::DataNodeRegistered {
                                node_id: r.node_id,
                                cluster_id: shared.config.cluster_id,
                                config: r.config,
                                tables: r.tables,
                                incarnation: r.incarnation,
                            }
                        }),
                    role => Err(already_registered(role)),
                };
                if let Err(e) = &result {
                    warn!(node_id, incarnation, peer = %self.handle.peer, "reattach refused: {e}");
                }
                self.respond_result(id, result).await
            }
            Request::RegisterApi => {
                let result = match self.role {
                    Role::Unregistered => shared.register_api(&self.handle).map(|node_id| {
                        self.role = Role::Api(node_id);
                        info!(node_id, peer = %self.handle.peer, "API node registered");
                        Response::ApiRegistered {
                            node_id,
                            cluster_id: shared.config.cluster_id,
                        }
                    }),
                    role => Err(already_registered(role)),
                };
                self.respond_result(id, result).await
            }
            Request::ReportStatus { status } => match self.role {
                Role::DataNode(node_id) => {
                    shared.report_status(node_id, self.handle.conn_id, status);
                    Ok(())
                }
                _ => Err("report_status from a connection that is not a data node".into()),
            },
            Request::AckEvent { event_id, error } => match self.role {
                Role::DataNode(node_id) => {
                    shared.ack_event(node_id, event_id, error.map_or(Ok(()), |e| Err(e.into())));
                    Ok(())
                }
                _ => Err("ack_event from a connection that is not a data node".into()),
            },
            Request::DataNodes => {
                let nodes = shared
                    .status()
                    .nodes
                    .into_iter()
                    .filter(|n| n.kind == KIND_DATANODE)
                    .collect();
                self.respond(id, Response::Nodes(nodes)).await
            }
            Request::GetTable { name } => {
                let result = shared.get_table(&name).map(Response::Table);
                self.respond_result(id, result).await
            }
            Request::ListTables => {
                self.respond(id, Response::Tables(shared.list_tables()))
                    .await
            }
            Request::CreateTable { def } => {
                let result = match self.require_api() {
                    Ok(_) => shared.create_table(def).await.map(Response::Table),
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::DropTable { name } => {
                let result = match self.require_api() {
                    Ok(_) => shared.drop_table(&name).await.map(|()| Response::Ok),
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::StopNode { node_id } => {
                let result = match self.require_api() {
                    Ok(_) => shared.stop_node(node_id).await.map(|()| Response::Ok),
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::StartNode { node_id } => {
                let result = self
                    .require_api()
                    .and_then(|_| shared.start_node(node_id))
                    .map(|()| Response::Ok);
                self.respond_result(id, result).await
            }
            Request::RestartNode { node_id } => {
                let result = match self.require_api() {
                    Ok(_) => shared.restart_node(node_id).await.map(|()| Response::Ok),
                    Err(e) => Err(e),
                };
                self.respond_result(id, result).await
            }
            Request::Supervise { nodes } => {
                let result = self
                    .require_api()
                    .and_then(|api_id| shared.supervise(api_id, nodes))
                    .map(|()| Response::Ok);
                self.respond_result(id, result).await
            }
            Request::Arbitrate { view, survivors } => {
                let result = match self.role {
                    Role::DataNode(asker) => shared
                        .arbitrate(asker, view, survivors)
                        .await
                        .map(|granted| Response::Arbitration { granted }),
                    _ => Err(ShoalError::with_detail(
                        ErrorCode::BadRequest,
                        "only a registered data node may ask the arbitrator",
                    )),
                };
                self.respond_result(id, result).await
            }
        }
    }

    /// The API node id of this connection, or the error for anyone else.
    fn require_api(&self) -> Result<u16, ShoalError> {
        match self.role {
            Role::Api(id) => Ok(id),
            _ => Err(ShoalError::with_detail(
                ErrorCode::BadRequest,
                "register as an API node before changing the schema, stopping, starting, \
                 restarting or supervising nodes",
            )),
        }
    }
}

fn already_registered(role: Role) -> ShoalError {
    let what = match role {
        Role::DataNode(id) => format!("data node {id}"),
        Role::Api(id) => format!("API node {id}"),
        Role::Unregistered => "nothing".into(),
    };
    ShoalError::with_detail(
        ErrorCode::BadRequest,
        format!("this connection is already registered as {what}"),
    )
}
