//! The async client of mgmd: `shoal mgm` (no registration), data nodes
//! ([`DataNodeSession`]) and API nodes ([`ApiSession`]).
//!
//! Each connection has a reader task that sorts incoming frames into
//! responses and events, so [`DataNodeSession::next_event`] is cancel-safe
//! (it only receives from a channel). Request methods are not cancel-safe:
//! dropping one mid-write may leave half a frame on the wire, after which
//! mgmd closes the connection.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use shoal_types::{ErrorCode, ShoalError, TableDef};
use tokio::io::BufReader;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::debug;

use crate::config::{DataNodeConfig, KIND_API, KIND_DATANODE, KIND_MGMD};
use crate::proto::{
    encode_frame, read_frame, write_encoded, ClientFrame, MgmEvent, NodeState, NodeStatus, Request,
    Response, ServerFrame, ServerMessage, WireError, FRAME_BYTES_MAX, PROTOCOL_VERSION,
};
pub use crate::proto::{ClusterStatus, NodeInfo};

/// How long `connect` tries to reach mgmd.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request waits for its answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a schema change waits for its answer (mgmd waits for every data
/// node's ack, and may roll back, before answering).
pub const SCHEMA_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// Events buffered between the reader task and `next_event`; when full, the
/// reader stops reading and mgmd eventually closes the connection.
const EVENT_QUEUE: usize = 256;
const RESPONSE_QUEUE: usize = 16;

fn mgmd_err(detail: impl Into<String>) -> ShoalError {
    ShoalError::with_detail(ErrorCode::MgmdFailure, detail)
}

/// One TCP connection to mgmd.
struct Connection {
    addr: String,
    writer: OwnedWriteHalf,
    next_id: u64,
    responses: mpsc::Receiver<(u64, Response)>,
    events: mpsc::Receiver<(u64, MgmEvent)>,
    /// Why the reader task stopped, for error messages.
    closed_reason: Arc<Mutex<Option<String>>>,
    reader: JoinHandle<()>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Closes the read half too, so mgmd sees the connection end and
        // frees the node id at once.
        self.reader.abort();
    }
}

impl Connection {
    async fn open(addr: &str) -> Result<Connection, ShoalError> {
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(mgmd_err(format!("cannot connect to mgmd at {addr}: {e}"))),
            Err(_) => {
                return Err(mgmd_err(format!(
                    "cannot connect to mgmd at {addr}: no answer within {} s",
                    CONNECT_TIMEOUT.as_secs()
                )))
            }
        };
        let _ = stream.set_nodelay(true);
        let (rd, wr) = stream.into_split();
        let (resp_tx, responses) = mpsc::channel(RESPONSE_QUEUE);
        let (ev_tx, events) = mpsc::channel(EVENT_QUEUE);
        let closed_reason = Arc::new(Mutex::new(None));
        let reader = tokio::spawn(read_loop(rd, resp_tx, ev_tx, closed_reason.clone()));
        Ok(Connection {
            addr: addr.to_string(),
            writer: wr,
            next_id: 0,
            responses,
            events,
            closed_reason,
            reader,
        })
    }

    fn lost(&self) -> ShoalError {
        let reason = self
            .closed_reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_else(|| "connection closed".to_string());
        mgmd_err(format!(
            "connection to mgmd at {} lost: {reason}",
            self.addr
        ))
    }

    async fn send(&mut self, request: Request) -> Result<u64, ShoalError> {
        self.next_id += 1;
        let id = self.next_id;
        let frame = encode_frame(&ClientFrame {
            v: PROTOCOL_VERSION,
            id,
            request,
        })?;
        match tokio::time::timeout(REQUEST_TIMEOUT, write_encoded(&mut self.writer, &frame)).await {
            Ok(Ok(())) => Ok(id),
            Ok(Err(e)) => Err(mgmd_err(format!(
                "cannot send to mgmd at {}: {e}",
                self.addr
            ))),
            Err(_) => Err(mgmd_err(format!(
                "cannot send to mgmd at {}: not accepting data for {} s",
                self.addr,
                REQUEST_TIMEOUT.as_secs()
            ))),
        }
    }

    async fn request(
        &mut self,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, ShoalError> {
        let id = self.send(request).await?;
        let deadline = Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.responses.recv()).await {
                Err(_) => {
                    return Err(mgmd_err(format!(
                        "no answer from mgmd at {} within {} s",
                        self.addr,
                        timeout.as_secs()
                    )))
                }
                Ok(None) => return Err(self.lost()),
                Ok(Some((rid, response))) => {
                    if rid == id {
                        return match response {
                            Response::Error(e) => Err(e.into()),
                            r => Ok(r),
                        };
                    }
                    // Id 0 is mgmd speaking about the connection itself
                    // (version refused, too many connections).
                    if rid == 0 {
                        if let Response::Error(e) = response {
                            return Err(e.into());
                        }
                    }
                    // Otherwise: the late answer to a request that timed out.
                    debug!(rid, id, "skipping stale mgmd answer");
                }
            }
        }
    }

    async fn show(&mut self) -> Result<ClusterStatus, ShoalError> {
        match self.request(Request::Show, REQUEST_TIMEOUT).await? {
            Response::Status(s) => Ok(s),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(r: &Response) -> ShoalError {
    mgmd_err(format!("unexpected answer from mgmd: {r:?}"))
}

async fn read_loop(
    rd: OwnedReadHalf,
    responses: mpsc::Sender<(u64, Response)>,
    events: mpsc::Sender<(u64, MgmEvent)>,
    closed_reason: Arc<Mutex<Option<String>>>,
) {
    let mut rd = BufReader::new(rd);
    let reason = loop {
        let body = match read_frame(&mut rd, FRAME_BYTES_MAX).await {
            Ok(Some(b)) => b,
            Ok(None) => break "mgmd closed the connection".to_string(),
            Err(e) => break format!("read failed: {e}"),
        };
        let frame: ServerFrame = match serde_json::from_slice(&body) {
            Ok(f) => f,
            Err(e) => break format!("malformed frame from mgmd: {e}"),
        };
        if frame.v != PROTOCOL_VERSION {
            break format!(
                "mgmd speaks protocol version {}, this client version {PROTOCOL_VERSION}",
                frame.v
            );
        }
        let delivered = match frame.msg {
            ServerMessage::Response { id, response } => {
                responses.send((id, response)).await.is_ok()
            }
            ServerMessage::Event { event_id, event } => {
                events.send((event_id, event)).await.is_ok()
            }
        };
        if !delivered {
            break "session closed".to_string();
        }
    };
    debug!("mgmd connection reader ends: {reason}");
    *closed_reason.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
}

/// A connection to mgmd that has not registered as a node.
pub struct MgmClient {
    conn: Connection,
}

impl MgmClient {
    /// Connects to mgmd at "host:port" (gives up after 5 s).
    pub async fn connect(addr: &str) -> Result<MgmClient, ShoalError> {
        Ok(MgmClient {
            conn: Connection::open(addr).await?,
        })
    }

    /// Registers as data node `node_id` (`None` = the first free data node
    /// id in the config) and receives its config and the current schema.
    pub async fn register_data_node(
        mut self,
        node_id: Option<u16>,
    ) -> Result<DataNodeSession, ShoalError> {
        match self
            .conn
            .request(Request::RegisterDataNode { node_id }, REQUEST_TIMEOUT)
            .await?
        {
            Response::DataNodeRegistered {
                node_id,
                cluster_id,
                config,
                tables,
                incarnation,
            } => Ok(DataNodeSession {
                conn: self.conn,
                node_id,
                cluster_id,
                config,
                tables,
                incarnation,
            }),
            other => Err(unexpected(&other)),
        }
    }

    /// Takes data node `node_id` back in start `incarnation` after its
    /// session broke (mgmd restarted, or the connection failed), without
    /// counting a new start. The session's tables are mgmd's schema as it
    /// is now. Refused with `HandshakeRejected` when it can never succeed
    /// (another cluster, an id not in the config, a start that is not the
    /// node's last one) and `NodeIdRefused` while mgmd still holds a live
    /// session for the id (worth retrying).
    pub async fn reattach_data_node(
        mut self,
        node_id: u16,
        incarnation: u32,
        cluster_id: u64,
    ) -> Result<DataNodeSession, ShoalError> {
        let request = Request::ReattachDataNode {
            node_id,
            incarnation,
            cluster_id,
        };
        match self.conn.request(request, REQUEST_TIMEOUT).await? {
            Response::DataNodeRegistered {
                node_id: got_id,
                cluster_id: got_cluster,
                config,
                tables,
                incarnation: got_incarnation,
            } => {
                if (got_id, got_incarnation, got_cluster) != (node_id, incarnation, cluster_id) {
                    return Err(mgmd_err(format!(
                        "mgmd answered the reattach of data node {node_id} (start {incarnation}, \
                         cluster {cluster_id}) for data node {got_id} (start {got_incarnation}, \
                         cluster {got_cluster})"
                    )));
                }
                Ok(DataNodeSession {
                    conn: self.conn,
                    node_id,
                    cluster_id,
                    config,
                    tables,
                    incarnation,
                })
            }
            other => Err(unexpected(&other)),
        }
    }

    /// Registers as an API node; mgmd picks the id.
    pub async fn register_api(mut self) -> Result<ApiSession, ShoalError> {
        match self
            .conn
            .request(Request::RegisterApi, REQUEST_TIMEOUT)
            .await?
        {
            Response::ApiRegistered {
                node_id,
                cluster_id,
            } => Ok(ApiSession {
                conn: self.conn,
                node_id,
                cluster_id,
            }),
            other => Err(unexpected(&other)),
        }
    }

    /// The cluster's nodes and their states (`shoal mgm show`).
    pub async fn show(&mut self) -> Result<ClusterStatus, ShoalError> {
        self.conn.show().await
    }

    /// Every table, by id.
    pub async fn list_tables(&mut self) -> Result<Vec<TableDef>, ShoalError> {
        list_tables(&mut self.conn).await
    }
}

async fn list_tables(conn: &mut Connection) -> Result<Vec<TableDef>, ShoalError> {
    match conn.request(Request::ListTables, REQUEST_TIMEOUT).await? {
        Response::Tables(t) => Ok(t),
        other => Err(unexpected(&other)),
    }
}

/// A registered (or reattached) data node. Holds its node id until
/// dropped.
pub struct DataNodeSession {
    conn: Connection,
    node_id: u16,
    cluster_id: u64,
    config: DataNodeConfig,
    tables: Vec<TableDef>,
    incarnation: u32,
}

impl DataNodeSession {
    pub fn node_id(&self) -> u16 {
        self.node_id
    }

    /// This node's start number: how many times its id has registered with
    /// mgmd, this time included (1 the first time; durable across mgmd
    /// restarts). Lets the other nodes tell this life from an earlier one.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    pub fn cluster_id(&self) -> u64 {
        self.cluster_id
    }

    pub fn config(&self) -> &DataNodeConfig {
        &self.config
    }

    /// Every table that existed at registration (or at the reattach), by
    /// id. Later changes come as events.
    pub fn initial_tables(&self) -> &[TableDef] {
        &self.tables
    }

    /// The next event from mgmd. Cancel-safe. Err when the connection to
    /// mgmd is gone.
    pub async fn next_event(&mut self) -> Result<(u64, MgmEvent), ShoalError> {
        match self.conn.events.recv().await {
            Some(e) => Ok(e),
            None => Err(self.conn.lost()),
        }
    }

    /// Tells mgmd the event was applied (Ok) or failed (the error is passed
    /// to the client that made the schema change).
    pub async fn ack_event(
        &mut self,
        event_id: u64,
        result: Result<(), ShoalError>,
    ) -> Result<(), ShoalError> {
        let error = result.err().map(|e| WireError::from(&e));
        self.conn
            .send(Request::AckEvent { event_id, error })
            .await
            .map(|_| ())
    }

    /// Every configured data node with its state and live port (how data
    /// nodes find each other).
    pub async fn data_nodes(&mut self) -> Result<Vec<NodeInfo>, ShoalError> {
        match self
            .conn
            .request(Request::DataNodes, REQUEST_TIMEOUT)
            .await?
        {
            Response::Nodes(n) => Ok(n),
            other => Err(unexpected(&other)),
        }
    }

    /// Asks the arbitrator whether this node's side of a split may go on:
    /// `view` is the last view its side committed, `newest` the newest it
    /// knows of, `survivors` the side's started nodes (this node among
    /// them); `view` 0 asks whether `survivors` may start a cluster without
    /// the other data nodes. `Ok(true)` = go on; `Ok(false)` = another
    /// side won, shut down (or wait, for a start). Waits at most the
    /// config's `arbitration_timeout_ms`; an error (no answer, mgmd gone)
    /// must be treated as a refusal.
    pub async fn arbitrate(
        &mut self,
        view: u64,
        newest: u64,
        survivors: Vec<u16>,
    ) -> Result<bool, ShoalError> {
        let timeout = Duration::from_millis(self.config.arbitration_timeout_ms);
        match self
            .conn
            .request(
                Request::Arbitrate {
                    view,
                    newest,
                    survivors,
                },
                timeout,
            )
            .await?
        {
            Response::Arbitration { granted } => Ok(granted),
            other => Err(unexpected(&other)),
        }
    }

    /// Reports state, listen port and memory use; `show` displays the last
    /// report. Started nodes should report about once a second.
    pub async fn report_status(&mut self, status: NodeStatus) -> Result<(), ShoalError> {
        self.conn
            .send(Request::ReportStatus { status })
            .await
            .map(|_| ())
    }
}

/// A registered API node (client, SQL node, `shoal mgm` admin commands).
pub struct ApiSession {
    conn: Connection,
    node_id: u16,
    cluster_id: u64,
}

impl ApiSession {
    pub fn node_id(&self) -> u16 {
        self.node_id
    }

    pub fn cluster_id(&self) -> u64 {
        self.cluster_id
    }

    /// Every configured data node with its state and live port.
    pub async fn data_nodes(&mut self) -> Result<Vec<NodeInfo>, ShoalError> {
        match self
            .conn
            .request(Request::DataNodes, REQUEST_TIMEOUT)
            .await?
        {
            Response::Nodes(n) => Ok(n),
            other => Err(unexpected(&other)),
        }
    }

    /// Creates a table; returns it with id and version assigned once every
    /// connected data node has it.
    pub async fn create_table(&mut self, def: TableDef) -> Result<TableDef, ShoalError> {
        match self
            .conn
            .request(Request::CreateTable { def }, SCHEMA_REQUEST_TIMEOUT)
            .await?
        {
            Response::Table(t) => Ok(t),
            other => Err(unexpected(&other)),
        }
    }

    pub async fn drop_table(&mut self, name: &str) -> Result<(), ShoalError> {
        match self
            .conn
            .request(
                Request::DropTable {
                    name: name.to_string(),
                },
                SCHEMA_REQUEST_TIMEOUT,
            )
            .await?
        {
            Response::Ok => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// Adds an ordered index to `table`; answers once every data node
    /// built it.
    pub async fn create_index(
        &mut self,
        table: &str,
        index: shoal_types::IndexDef,
    ) -> Result<TableDef, ShoalError> {
        match self
            .conn
            .request(
                Request::CreateIndex {
                    table: table.to_string(),
                    index,
                },
                SCHEMA_REQUEST_TIMEOUT,
            )
            .await?
        {
            Response::Table(t) => Ok(t),
            other => Err(unexpected(&other)),
        }
    }

    /// Adds unique index `index` to `table` (its `table` and `building`
    /// are set by mgmd). Answers once every data node keeps the index
    /// with every write; the index is then `building`: fill it from the
    /// table's rows and call [`ApiSession::unique_index_built`] on this
    /// same session (if it closes first, mgmd drops the index).
    pub async fn create_unique_index(
        &mut self,
        table: &str,
        index: shoal_types::UniqueIndexDef,
    ) -> Result<TableDef, ShoalError> {
        self.expect_table(
            Request::CreateUniqueIndex {
                table: table.to_string(),
                index,
            },
            SCHEMA_REQUEST_TIMEOUT,
        )
        .await
    }

    /// Marks unique index `index` of `table` built: reads through it are
    /// served once every data node acked.
    pub async fn unique_index_built(
        &mut self,
        table: &str,
        index: &str,
        index_table: shoal_types::TableId,
    ) -> Result<TableDef, ShoalError> {
        self.expect_table(
            Request::UniqueIndexBuilt {
                table: table.to_string(),
                index: index.to_string(),
                index_table,
            },
            SCHEMA_REQUEST_TIMEOUT,
        )
        .await
    }

    async fn expect_table(
        &mut self,
        request: Request,
        timeout: Duration,
    ) -> Result<TableDef, ShoalError> {
        match self.conn.request(request, timeout).await? {
            Response::Table(t) => Ok(t),
            other => Err(unexpected(&other)),
        }
    }

    /// Drops index `index` of `table`: an ordered one, or a unique one
    /// (with its hidden table).
    pub async fn drop_index(&mut self, table: &str, index: &str) -> Result<TableDef, ShoalError> {
        self.drop_index_if(table, index, None).await
    }

    /// [`ApiSession::drop_index`], only if `index` is the unique index
    /// whose hidden table is `index_table` (given).
    pub async fn drop_index_if(
        &mut self,
        table: &str,
        index: &str,
        index_table: Option<shoal_types::TableId>,
    ) -> Result<TableDef, ShoalError> {
        match self
            .conn
            .request(
                Request::DropIndex {
                    table: table.to_string(),
                    index: index.to_string(),
                    index_table,
                },
                SCHEMA_REQUEST_TIMEOUT,
            )
            .await?
        {
            Response::Table(t) => Ok(t),
            other => Err(unexpected(&other)),
        }
    }

    pub async fn get_table(&mut self, name: &str) -> Result<TableDef, ShoalError> {
        match self
            .conn
            .request(
                Request::GetTable {
                    name: name.to_string(),
                },
                REQUEST_TIMEOUT,
            )
            .await?
        {
            Response::Table(t) => Ok(t),
            other => Err(unexpected(&other)),
        }
    }

    /// Every table, by id.
    pub async fn list_tables(&mut self) -> Result<Vec<TableDef>, ShoalError> {
        list_tables(&mut self.conn).await
    }

    /// Creates SQL database `name`; `TableExists` if it exists (or is
    /// reserved).
    pub async fn create_database(&mut self, name: &str) -> Result<(), ShoalError> {
        self.expect_ok(
            Request::CreateDatabase {
                name: name.to_string(),
            },
            SCHEMA_REQUEST_TIMEOUT,
        )
        .await
    }

    /// Drops SQL database `name` with its tables; returns the tables
    /// dropped. `NoSuchTable` if it does not exist.
    pub async fn drop_database(&mut self, name: &str) -> Result<Vec<TableDef>, ShoalError> {
        match self
            .conn
            .request(
                Request::DropDatabase {
                    name: name.to_string(),
                },
                SCHEMA_REQUEST_TIMEOUT,
            )
            .await?
        {
            Response::Tables(t) => Ok(t),
            other => Err(unexpected(&other)),
        }
    }

    /// Every SQL database, sorted by name.
    pub async fn list_databases(&mut self) -> Result<Vec<String>, ShoalError> {
        match self
            .conn
            .request(Request::ListDatabases, REQUEST_TIMEOUT)
            .await?
        {
            Response::Databases(d) => Ok(d),
            other => Err(unexpected(&other)),
        }
    }

    pub async fn show(&mut self) -> Result<ClusterStatus, ShoalError> {
        self.conn.show().await
    }

    /// One request about SQL accounts: the accounts listed, or those the
    /// change created or changed (written to mgmd's disk first).
    pub async fn users(
        &mut self,
        request: crate::proto::UsersRequest,
    ) -> Result<Vec<crate::proto::UserAccount>, ShoalError> {
        match self
            .conn
            .request(Request::Users(request), REQUEST_TIMEOUT)
            .await?
        {
            Response::Accounts(a) => Ok(a),
            other => Err(unexpected(&other)),
        }
    }

    /// `N stop`: marks data node `node_id` not wanted (its supervisor keeps
    /// it down) and, if it runs, asks it to stop and waits for its ack.
    pub async fn stop_node(&mut self, node_id: u16) -> Result<(), ShoalError> {
        self.expect_ok(Request::StopNode { node_id }, SCHEMA_REQUEST_TIMEOUT)
            .await
    }

    /// `N start`: marks data node `node_id` wanted again; its supervisor
    /// starts it. Without a supervisor the error says how to start it by
    /// hand (the node stays marked wanted).
    pub async fn start_node(&mut self, node_id: u16) -> Result<(), ShoalError> {
        self.expect_ok(Request::StartNode { node_id }, REQUEST_TIMEOUT)
            .await
    }

    /// `N restart`: asks a supervised data node to stop, and its supervisor
    /// starts it again. Refused for a node without a supervisor.
    pub async fn restart_node(&mut self, node_id: u16) -> Result<(), ShoalError> {
        self.expect_ok(Request::RestartNode { node_id }, SCHEMA_REQUEST_TIMEOUT)
            .await
    }

    /// Declares that this session restarts `nodes` when they exit, until it
    /// closes (replaces an earlier declaration; empty withdraws it).
    pub async fn supervise(&mut self, nodes: Vec<u16>) -> Result<(), ShoalError> {
        self.expect_ok(Request::Supervise { nodes }, REQUEST_TIMEOUT)
            .await
    }

    async fn expect_ok(&mut self, request: Request, timeout: Duration) -> Result<(), ShoalError> {
        match self.conn.request(request, timeout).await? {
            Response::Ok => Ok(()),
            other => Err(unexpected(&other)),
        }
    }
}

/// Polls `show` until every data node is started. Keeps retrying while mgmd
/// is unreachable. On timeout the error lists the nodes not started
/// (`NodeNotReady`) or, if mgmd never answered, why (`MgmdFailure`).
pub async fn wait_started(addr: &str, timeout: Duration) -> Result<ClusterStatus, ShoalError> {
    const POLL_INTERVAL: Duration = Duration::from_millis(100);
    let deadline = Instant::now() + timeout;
    let mut client: Option<MgmClient> = None;
    let mut last_problem = mgmd_err(format!("mgmd at {addr} did not answer"));
    loop {
        if client.is_none() {
            match tokio::time::timeout_at(deadline, MgmClient::connect(addr)).await {
                Ok(Ok(c)) => client = Some(c),
                Ok(Err(e)) => last_problem = e,
                Err(_) => {}
            }
        }
        if let Some(c) = client.as_mut() {
            match tokio::time::timeout_at(deadline, c.show()).await {
                Ok(Ok(status)) => {
                    let waiting: Vec<String> = status
                        .nodes
                        .iter()
                        .filter(|n| n.kind == KIND_DATANODE && n.state != NodeState::Started)
                        .map(|n| format!("node {} ({})", n.node_id, n.state.as_str()))
                        .collect();
                    if waiting.is_empty() {
                        return Ok(status);
                    }
                    last_problem = ShoalError::with_detail(
                        ErrorCode::NodeNotReady,
                        format!("data nodes not started: {}", waiting.join(", ")),
                    );
                }
                Ok(Err(e)) => {
                    last_problem = e;
                    client = None;
                }
                Err(_) => {}
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(ShoalError::with_detail(
                last_problem.code,
                format!(
                    "cluster at {addr} not started after {:.1} s: {}",
                    timeout.as_secs_f64(),
                    last_problem.detail
                ),
            ));
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline - now)).await;
    }
}

/// A data node's state for `show`; a starting node that reports its
/// progress reads e.g. "starting (copying fragments, 45 %)".
fn state_text(n: &NodeInfo) -> String {
    let phase = n
        .status
        .as_ref()
        .and_then(|s| s.start_phase.as_ref())
        .filter(|_| n.state == NodeState::Starting);
    match phase {
        Some(p) => match p.percent() {
            Some(pct) => format!("{} ({}, {pct} %)", n.state.as_str(), p.what),
            None => format!("{} ({})", n.state.as_str(), p.what),
        },
        None => n.state.as_str().to_string(),
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Renders a [`ClusterStatus`] like `ndb_mgm -e show`.
pub fn format_show(status: &ClusterStatus) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Cluster Configuration (cluster id {}, {} replica(s))",
        status.cluster_id, status.no_of_replicas
    );
    let _ = writeln!(out, "---------------------");
    let of_kind = |kind: &str| -> Vec<&NodeInfo> {
        let mut v: Vec<&NodeInfo> = status.nodes.iter().filter(|n| n.kind == kind).collect();
        v.sort_by_key(|n| n.node_id);
        v
    };

    let data_nodes = of_kind(KIND_DATANODE);
    let _ = writeln!(out, "[datanode] {} node(s)", data_nodes.len());
    for n in &data_nodes {
        let addr = format!("@{}:{}", n.host, n.port);
        let group = n
            .node_group
            .map_or_else(|| "no nodegroup".to_string(), |g| format!("nodegroup {g}"));
        let mut detail = format!("{group}, {} primary fragment(s)", n.primaries);
        if n.incarnation > 0 {
            let _ = write!(detail, ", start #{}", n.incarnation);
        }
        if !n.wanted_running {
            let _ = write!(
                detail,
                ", stopped on request (`{} start` starts it)",
                n.node_id
            );
        }
        if n.supervised {
            detail.push_str(", supervised");
        }
        if let Some(s) = &n.status {
            let free = s
                .data_memory_total_bytes
                .saturating_sub(s.data_memory_used_bytes);
            let _ = write!(
                detail,
                ", data memory used {:.1} MiB / free {:.1} MiB, {} rows, {} client connection(s)",
                mib(s.data_memory_used_bytes),
                mib(free),
                s.rows,
                s.client_connections
            );
        }
        let _ = writeln!(
            out,
            "id={:<4} {:<22} {:<12} ({detail})",
            n.node_id,
            addr,
            state_text(n)
        );
    }

    let mgmds = of_kind(KIND_MGMD);
    let _ = writeln!(out, "\n[mgmd] {} node(s)", mgmds.len());
    for n in mgmds {
        let addr = format!("@{}:{}", n.host, n.port);
        let _ = writeln!(out, "id={:<4} {:<22} {}", n.node_id, addr, n.state.as_str());
    }

    let apis = of_kind(KIND_API);
    let _ = writeln!(out, "\n[api] {} node(s)", apis.len());
    for n in apis {
        if n.state == NodeState::NotStarted {
            let _ = writeln!(out, "id={:<4} (not connected)", n.node_id);
        } else {
            let _ = writeln!(out, "id={:<4} @{:<21} connected", n.node_id, n.host);
        }
    }
    out
}
