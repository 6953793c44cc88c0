//! The mgmd protocol: length-prefixed JSON frames over TCP.
//!
//! Every frame is a `u32` little-endian body length followed by that many
//! bytes of UTF-8 JSON. Bodies larger than [`FRAME_BYTES_MAX`] (16 MiB) are
//! refused by both sides and the connection is closed. A client sends
//! [`ClientFrame`]s; mgmd answers each request that expects an answer with a
//! [`ServerMessage::Response`] carrying the request's `id`, and pushes
//! [`ServerMessage::Event`]s to registered data nodes. `docs/PROTOCOL.md`
//! ("mgmd protocol") describes every message.
//!
//! JSON (rather than the binary signal format of the data path) is a
//! deliberate choice: mgmd traffic is rare and small, and being able to read
//! it with `tcpdump` or speak it from a script is worth more than speed.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use shoal_types::{ErrorCode, ShoalError, TableDef};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::DataNodeConfig;

/// Version carried in every frame (`"v"`); a peer with another version is
/// refused with `HandshakeRejected`.
pub const PROTOCOL_VERSION: u16 = 1;
/// Largest frame body, in bytes.
pub const FRAME_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Bytes of the length prefix.
pub const FRAME_HEADER_BYTES: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// Known to the config, not connected.
    NotStarted,
    /// Connected to mgmd, loading schema, not serving yet.
    Starting,
    /// Serving clients.
    Started,
}

impl NodeState {
    /// Lower-case words for `show` and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::NotStarted => "not started",
            NodeState::Starting => "starting",
            NodeState::Started => "started",
        }
    }
}

/// What a data node reports about itself (at state changes and every second).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub state: NodeState,
    pub data_memory_used_bytes: u64,
    pub data_memory_total_bytes: u64,
    pub rows: u64,
    pub client_connections: u32,
    /// The port the data node actually listens on (its config may say 0).
    #[serde(default)]
    pub listen_port: u16,
    /// While `starting`: how far its start has come (`show` prints it).
    #[serde(default)]
    pub start_phase: Option<StartPhase>,
    /// A member of a formed cluster — started, or still restoring or
    /// copying its rows. mgmd allows no new cluster to form beside it
    /// (a node that took it for fresh may ask, after an mgmd restart).
    #[serde(default)]
    pub in_cluster: bool,
}

/// Progress of a starting data node: what it is doing and how much of it
/// is done, in units of its own choosing (bytes, fragments, ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartPhase {
    /// What the node is doing, in words ("copying fragments").
    pub what: String,
    pub done: u64,
    /// 0 = the total is not known yet (`show` then prints no percentage).
    pub total: u64,
}

impl StartPhase {
    /// Whole percent done, at most 100; `None` while the total is unknown.
    pub fn percent(&self) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        // u128: done * 100 must not overflow for byte counts near u64::MAX.
        let pct = u128::from(self.done.min(self.total)) * 100 / u128::from(self.total);
        Some(pct as u64)
    }
}

/// Schema changes pushed by mgmd to each data node; each must be acked
/// (after the node applied it) before mgmd answers the client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MgmEvent {
    TableCreated(shoal_types::TableDef),
    TableDropped {
        id: shoal_types::TableId,
    },
    /// The table's indexes changed; same columns and version. An ordered
    /// index added is built before the node acks; a unique index added
    /// (or a table's unique indexes at its create) is acked once every
    /// transaction the node had begun before has ended, so every later
    /// write keeps it; one dropped is no longer kept.
    IndexesChanged(shoal_types::TableDef),
    /// mgmd asks the node to stop.
    Shutdown,
}

/// The cluster as `show` sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterStatus {
    pub cluster_id: u64,
    pub no_of_replicas: u32,
    /// Every configured node, plus connected API nodes without a section,
    /// in node-id order.
    pub nodes: Vec<NodeInfo>,
}

/// One node in [`ClusterStatus`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub node_id: u16,
    /// "mgmd" | "datanode" | "api"
    pub kind: String,
    /// The configured host; for connected API nodes the peer's address.
    pub host: String,
    /// The live listen port for started data nodes, else the configured one.
    pub port: u16,
    pub state: NodeState,
    /// The last status a connected data node reported.
    pub status: Option<NodeStatus>,
    /// Data nodes: primary replicas of table fragments held (all tables).
    #[serde(default)]
    pub primaries: u32,
    /// Data nodes: its node group.
    #[serde(default)]
    pub node_group: Option<u16>,
    /// Data nodes: how many times the node registered with mgmd (its start
    /// number, durable across mgmd restarts); the live session's while it
    /// is connected. 0 = never started.
    #[serde(default)]
    pub incarnation: u32,
    /// Data nodes: whether the operator wants it running (`N stop` clears
    /// it, `N start` sets it; kept in mgmd's memory, true after mgmd
    /// starts). A supervisor does not restart a node that is not wanted.
    #[serde(default)]
    pub wanted_running: bool,
    /// Data nodes: whether a connected supervisor (`shoal up`) restarts the
    /// node when it exits.
    #[serde(default)]
    pub supervised: bool,
}

/// A [`ShoalError`] on the wire: the registry code and the detail.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireError {
    pub code: u16,
    pub detail: String,
}

impl From<&ShoalError> for WireError {
    fn from(e: &ShoalError) -> Self {
        WireError {
            code: e.code_u16(),
            detail: e.detail.clone(),
        }
    }
}

impl From<WireError> for ShoalError {
    fn from(e: WireError) -> Self {
        match ErrorCode::from_u16(e.code) {
            Some(code) => ShoalError::with_detail(code, e.detail),
            None => ShoalError::with_detail(
                ErrorCode::Internal,
                format!("unknown error code {} from peer: {}", e.code, e.detail),
            ),
        }
    }
}

/// A frame from a client (data node, API node, `shoal mgm`) to mgmd.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientFrame {
    pub v: u16,
    /// Chosen by the client, echoed in the response. Ignored for requests
    /// that get no response (`report_status`, `ack_event`).
    pub id: u64,
    pub request: Request,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// Any connection. Answer: `Response::Status`.
    Show,
    /// Unregistered connection only. `None` = first free data node id.
    /// Answer: `Response::DataNodeRegistered`.
    RegisterDataNode { node_id: Option<u16> },
    /// Unregistered connection only: a running data node whose mgmd
    /// session broke (mgmd restarted, or the connection failed) takes its
    /// node id back in the same start, without counting a new one.
    /// Accepted only if `cluster_id` is mgmd's, `incarnation` is the
    /// node's last recorded start and no live session holds the id.
    /// Answer: `Response::DataNodeRegistered` (the incarnation unchanged,
    /// the tables as they are now); refusals: `HandshakeRejected` for good
    /// (another cluster, an id not in the config, a start that is not the
    /// last one), `NodeIdRefused` while a live session holds the id.
    ReattachDataNode {
        node_id: u16,
        incarnation: u32,
        cluster_id: u64,
    },
    /// Unregistered connection only. Answer: `Response::ApiRegistered`.
    RegisterApi,
    /// Data node only; no answer.
    ReportStatus { status: NodeStatus },
    /// Data node only; no answer. `error: None` = applied.
    AckEvent {
        event_id: u64,
        error: Option<WireError>,
    },
    /// Any connection. Answer: `Response::Nodes`.
    DataNodes,
    /// API node only. Answer: `Response::Table`.
    CreateTable { def: TableDef },
    /// API node only. Answer: `Response::Ok`.
    DropTable { name: String },
    /// API node only: add an ordered index to a table (built online on
    /// every data node before the answer). Answer: `Response::Table`.
    CreateIndex {
        table: String,
        index: shoal_types::IndexDef,
    },
    /// API node only: drop an ordered or a unique index (a unique one:
    /// out of the table's definition, then its hidden table is dropped).
    /// Answer: `Response::Table`.
    DropIndex {
        table: String,
        index: String,
        /// Only if `index` is the unique index whose hidden table this is
        /// (a failed build drops its own index, never a namesake created
        /// after it was dropped).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index_table: Option<shoal_types::TableId>,
    },
    /// API node only: add a unique hash index to a table that may hold
    /// rows. mgmd creates the index's hidden table and lists the index as
    /// `building` (data nodes keep it with every write from then on, and
    /// refuse reads through it), and answers once every data node acked.
    /// The asking connection then fills the index from the table's rows
    /// and sends `UniqueIndexBuilt`; if it closes first, mgmd drops the
    /// index. `index.table` and `index.building` are mgmd's to set.
    /// Answer: `Response::Table` (the table with the index).
    CreateUniqueIndex {
        table: String,
        index: shoal_types::UniqueIndexDef,
    },
    /// API node only: the unique index's build is done; reads through it
    /// are served once every data node acked. Only the connection that
    /// created the index may say so, naming its hidden table (an index of
    /// the name created after this one was dropped is not this one).
    /// Answer: `Response::Table`.
    UniqueIndexBuilt {
        table: String,
        index: String,
        index_table: shoal_types::TableId,
    },
    /// API node only: create SQL database `name` (tables named
    /// `name.table` may then be created). Answer: `Response::Ok`; an
    /// existing or reserved name: `TableExists`.
    CreateDatabase { name: String },
    /// API node only: drop SQL database `name` with every table named
    /// `name.*` (and their unique indexes' hidden tables). Answer:
    /// `Response::Tables` (the tables dropped); missing: `NoSuchTable`.
    DropDatabase { name: String },
    /// Any connection. Answer: `Response::Databases`.
    ListDatabases,
    /// API node only: SQL accounts (see [`UsersRequest`]). Only API
    /// nodes get the password hashes: mgmd trusts every API node, as it
    /// trusts them with the schema. Answer: `Response::Accounts`.
    Users(UsersRequest),
    /// Any connection. Answer: `Response::Table`.
    GetTable { name: String },
    /// Any connection. Answer: `Response::Tables`.
    ListTables,
    /// API node only: mark the data node not wanted (a supervisor keeps it
    /// down), then, if it is connected, push `MgmEvent::Shutdown` and wait
    /// for its ack. Answer: `Response::Ok`.
    StopNode { node_id: u16 },
    /// API node only: mark the data node wanted again. Answer:
    /// `Response::Ok` if a supervisor will start it (or it runs); an error
    /// telling the operator to start it by hand if no supervisor covers it.
    StartNode { node_id: u16 },
    /// API node only, and only for a supervised data node: keep it wanted
    /// and push `MgmEvent::Shutdown`, so its supervisor starts it again.
    /// Answer: `Response::Ok` once the node acknowledged the stop.
    RestartNode { node_id: u16 },
    /// API node only: this connection restarts these data nodes when they
    /// exit, until it closes. Replaces the connection's earlier list (an
    /// empty list withdraws). Answer: `Response::Ok`.
    Supervise { nodes: Vec<u16> },
    /// Data node only: its side of a split holds exactly half of the
    /// started nodes and asks the arbitrator whether it may survive.
    /// `view` is the last view its side committed, `newest` the newest
    /// view it knows of (committed or only proposed; absent: `view`),
    /// `survivors` the side's started nodes (the asking node among them).
    /// `view` 0 asks instead whether `survivors`, finding no running
    /// cluster, may start one without the other data nodes (granted only
    /// if none of those reports itself started). Answer:
    /// `Response::Arbitration`, sent only after a grant is on disk.
    Arbitrate {
        view: u64,
        #[serde(default)]
        newest: u64,
        survivors: Vec<u16>,
    },
}

impl Request {
    /// Whether mgmd answers this request.
    pub fn expects_response(&self) -> bool {
        !matches!(
            self,
            Request::ReportStatus { .. } | Request::AckEvent { .. }
        )
    }
}

/// A frame from mgmd to a client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerFrame {
    pub v: u16,
    pub msg: ServerMessage,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerMessage {
    Response { id: u64, response: Response },
    Event { event_id: u64, event: MgmEvent },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    Error(WireError),
    Ok,
    Status(ClusterStatus),
    /// The answer to `RegisterDataNode` and to `ReattachDataNode`.
    DataNodeRegistered {
        node_id: u16,
        cluster_id: u64,
        config: DataNodeConfig,
        tables: Vec<TableDef>,
        /// How many times this node id has registered, this time included
        /// (1 the first time; durable in mgmd's `starts.json`). Tells a
        /// restarted node apart from its previous life. A reattach gets
        /// the start it asked for back.
        #[serde(default)]
        incarnation: u32,
    },
    ApiRegistered {
        node_id: u16,
        cluster_id: u64,
    },
    Nodes(Vec<NodeInfo>),
    Table(TableDef),
    Tables(Vec<TableDef>),
    /// SQL database names, sorted.
    Databases(Vec<String>),
    /// SQL accounts, by user then host: those a `Users` request listed,
    /// or those its change created or changed.
    Accounts(Vec<UserAccount>),
    /// The arbitrator's answer: `true` = this side survives.
    Arbitration {
        granted: bool,
    },
}

/// An SQL account's name: a user, and the host (a pattern) it may
/// connect from. mgmd keeps hosts in lower case (host names compare
/// without case, as in MySQL); user names compare exactly.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AccountName {
    pub user: String,
    /// `%` (anywhere), `localhost` (a loopback address), an address, or a
    /// pattern with `%` and `_` (`192.168.1.%`).
    pub host: String,
}

impl AccountName {
    pub fn new(user: &str, host: &str) -> AccountName {
        AccountName {
            user: user.to_string(),
            host: host.to_string(),
        }
    }
}

impl std::fmt::Display for AccountName {
    /// `'user'@'host'`, as MySQL's messages name an account.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "'{}'@'{}'", self.user, self.host)
    }
}

/// What an SQL node checks a password against: hashes, never the
/// password itself (SQL nodes hash it before it reaches mgmd).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredPassword {
    /// SHA1(SHA1(password)) in 40 upper-case hex digits: checks
    /// `mysql_native_password` proofs (MySQL's `*HEX` without the `*`).
    pub native: String,
    /// SHA256(SHA256(password)) in 64 upper-case hex digits: checks the
    /// `caching_sha2_password` fast path. Absent for an account created
    /// from a native hash alone (`IDENTIFIED WITH mysql_native_password
    /// AS '*HEX'`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl std::fmt::Debug for StoredPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Kept out of logs: a native hash and a sniffed scramble are
        // enough to log in.
        f.write_str("StoredPassword(..)")
    }
}

/// The privileges of an account: ALL PRIVILEGES at the database level,
/// or on every database.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grants {
    /// `ALL PRIVILEGES ON *.*`: every database, and managing accounts
    /// (creating, changing and dropping them, granting and revoking), as
    /// MySQL's ALL on `*.*` WITH GRANT OPTION.
    #[serde(default)]
    pub all_databases: bool,
    /// `ALL PRIVILEGES ON db.*`, by database name (a database need not
    /// exist to be granted, as in MySQL).
    #[serde(default)]
    pub databases: BTreeSet<String>,
}

/// One SQL account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserAccount {
    pub user: String,
    pub host: String,
    /// `None`: no password (the client logs in with an empty one).
    pub password: Option<StoredPassword>,
    #[serde(default)]
    pub grants: Grants,
}

impl UserAccount {
    pub fn name(&self) -> AccountName {
        AccountName::new(&self.user, &self.host)
    }
}

/// Where a GRANT or REVOKE applies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantLevel {
    /// `*.*`
    AllDatabases,
    /// `db.*`
    Database(String),
}

/// A new password for an account (`None`: no password).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasswordChange {
    pub account: AccountName,
    pub password: Option<StoredPassword>,
}

/// Requests about SQL accounts. Each change is all or nothing: it is
/// checked whole, written to mgmd's `users.json`, then answered; one
/// account that fails the check fails the request and changes nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsersRequest {
    /// Creates accounts with their passwords and grants. An existing one:
    /// `UserExists`, or left as it is with `if_not_exists`.
    Create {
        accounts: Vec<UserAccount>,
        #[serde(default)]
        if_not_exists: bool,
    },
    /// Sets passwords. A missing account: `NoSuchUser`, or skipped with
    /// `if_exists`.
    SetPassword {
        changes: Vec<PasswordChange>,
        #[serde(default)]
        if_exists: bool,
    },
    /// Drops accounts. A missing one: `NoSuchUser`, or skipped with
    /// `if_exists`.
    Drop {
        accounts: Vec<AccountName>,
        #[serde(default)]
        if_exists: bool,
    },
    /// Grants ALL at `level` (granting what is held changes nothing).
    /// A missing account: `NoSuchUser`.
    Grant {
        accounts: Vec<AccountName>,
        level: GrantLevel,
    },
    /// Revokes ALL at `level`. A missing account or one without that
    /// grant: `NoSuchGrant`.
    Revoke {
        accounts: Vec<AccountName>,
        level: GrantLevel,
    },
    /// Every account, or those of one user name.
    List {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        user: Option<String>,
    },
}

/// Just the version of a frame, read before the rest so a peer speaking a
/// newer protocol gets a clear refusal instead of a parse error.
#[derive(Deserialize)]
pub struct VersionProbe {
    pub v: u16,
}

/// Why reading a frame failed.
#[derive(Debug)]
pub enum FrameError {
    Io(std::io::Error),
    TooLarge { len: usize, max: usize },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "{e}"),
            FrameError::TooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the limit of {max} bytes")
            }
        }
    }
}

/// Reads one frame body. `Ok(None)` = the peer closed the connection
/// cleanly between frames. Not cancel-safe (callers drop the connection
/// when they stop reading).
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max_bytes: usize,
) -> Result<Option<Vec<u8>>, FrameError> {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    let mut filled = 0;
    while filled < FRAME_HEADER_BYTES {
        let n = r
            .read(&mut header[filled..])
            .await
            .map_err(FrameError::Io)?;
        if n == 0 {
            if filled == 0 {
                return Ok(None);
            }
            return Err(FrameError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed inside a frame header",
            )));
        }
        filled += n;
    }
    let len = u32::from_le_bytes(header) as usize;
    if len > max_bytes {
        return Err(FrameError::TooLarge {
            len,
            max: max_bytes,
        });
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.map_err(FrameError::Io)?;
    Ok(Some(body))
}

/// Encodes `msg` as one frame (length prefix + JSON).
pub fn encode_frame<T: Serialize>(msg: &T) -> Result<Vec<u8>, ShoalError> {
    let mut buf = vec![0u8; FRAME_HEADER_BYTES];
    serde_json::to_writer(&mut buf, msg).map_err(|e| {
        ShoalError::with_detail(ErrorCode::Internal, format!("cannot encode frame: {e}"))
    })?;
    let len = buf.len() - FRAME_HEADER_BYTES;
    if len > FRAME_BYTES_MAX {
        return Err(ShoalError::with_detail(
            ErrorCode::RequestTooLarge,
            format!("mgmd frame of {len} bytes exceeds the limit of {FRAME_BYTES_MAX} bytes"),
        ));
    }
    buf[..FRAME_HEADER_BYTES].copy_from_slice(&(len as u32).to_le_bytes());
    Ok(buf)
}

/// Writes one already-encoded frame and flushes it.
pub async fn write_encoded<W: AsyncWrite + Unpin>(w: &mut W, frame: &[u8]) -> std::io::Result<()> {
    w.write_all(frame).await?;
    w.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frame_round_trip_and_limits() {
        let msg = ClientFrame {
            v: PROTOCOL_VERSION,
            id: 7,
            request: Request::GetTable { name: "t1".into() },
        };
        let bytes = encode_frame(&msg).unwrap();
        assert_eq!(
            u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize,
            bytes.len() - 4
        );
        let mut r = &bytes[..];
        let body = read_frame(&mut r, FRAME_BYTES_MAX).await.unwrap().unwrap();
        let back: ClientFrame = serde_json::from_slice(&body).unwrap();
        assert_eq!(back, msg);
        assert!(read_frame(&mut r, FRAME_BYTES_MAX).await.unwrap().is_none());

        let mut r = &bytes[..];
        assert!(matches!(
            read_frame(&mut r, 3).await,
            Err(FrameError::TooLarge { .. })
        ));
        let mut truncated = &bytes[..bytes.len() - 1];
        assert!(matches!(
            read_frame(&mut truncated, FRAME_BYTES_MAX).await,
            Err(FrameError::Io(_))
        ));
    }

    #[test]
    fn json_shape_is_stable() {
        // docs/PROTOCOL.md shows these shapes; keep them in sync.
        let f = ClientFrame {
            v: 1,
            id: 1,
            request: Request::RegisterDataNode { node_id: Some(2) },
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"v":1,"id":1,"request":{"register_data_node":{"node_id":2}}}"#
        );
        let f = ClientFrame {
            v: 1,
            id: 2,
            request: Request::Show,
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"v":1,"id":2,"request":"show"}"#
        );
        let s = ServerFrame {
            v: 1,
            msg: ServerMessage::Event {
                event_id: 5,
                event: MgmEvent::TableDropped {
                    id: shoal_types::TableId(3),
                },
            },
        };
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"v":1,"msg":{"event":{"event_id":5,"event":{"table_dropped":{"id":3}}}}}"#
        );
        let f = ClientFrame {
            v: 1,
            id: 3,
            request: Request::Arbitrate {
                view: 7,
                newest: 8,
                survivors: vec![1, 3],
            },
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"v":1,"id":3,"request":{"arbitrate":{"view":7,"newest":8,"survivors":[1,3]}}}"#
        );
        let f = ClientFrame {
            v: 1,
            id: 3,
            request: Request::ReattachDataNode {
                node_id: 2,
                incarnation: 4,
                cluster_id: 1,
            },
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"v":1,"id":3,"request":{"reattach_data_node":{"node_id":2,"incarnation":4,"cluster_id":1}}}"#
        );
        let f = ClientFrame {
            v: 1,
            id: 4,
            request: Request::Supervise { nodes: vec![1, 2] },
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"v":1,"id":4,"request":{"supervise":{"nodes":[1,2]}}}"#
        );
        for (request, json) in [
            (Request::StopNode { node_id: 2 }, "stop_node"),
            (Request::StartNode { node_id: 2 }, "start_node"),
            (Request::RestartNode { node_id: 2 }, "restart_node"),
        ] {
            let f = ClientFrame {
                v: 1,
                id: 5,
                request,
            };
            assert_eq!(
                serde_json::to_string(&f).unwrap(),
                format!(r#"{{"v":1,"id":5,"request":{{"{json}":{{"node_id":2}}}}}}"#)
            );
        }
        let f = ClientFrame {
            v: 1,
            id: 6,
            request: Request::UniqueIndexBuilt {
                table: "t".into(),
                index: "u".into(),
                index_table: shoal_types::TableId(9),
            },
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"v":1,"id":6,"request":{"unique_index_built":{"table":"t","index":"u","index_table":9}}}"#
        );
        let f = ClientFrame {
            v: 1,
            id: 7,
            request: Request::CreateUniqueIndex {
                table: "t".into(),
                index: shoal_types::UniqueIndexDef {
                    name: "u".into(),
                    columns: vec![1],
                    table: shoal_types::TableId(0),
                    building: false,
                },
            },
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"v":1,"id":7,"request":{"create_unique_index":{"table":"t","index":{"name":"u","columns":[1],"table":0,"building":false}}}}"#
        );
        let f = ClientFrame {
            v: 1,
            id: 8,
            request: Request::CreateDatabase { name: "db".into() },
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"v":1,"id":8,"request":{"create_database":{"name":"db"}}}"#
        );
        let f = ClientFrame {
            v: 1,
            id: 9,
            request: Request::ListDatabases,
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"v":1,"id":9,"request":"list_databases"}"#
        );
        let s = ServerFrame {
            v: 1,
            msg: ServerMessage::Response {
                id: 9,
                response: Response::Databases(vec!["db".into()]),
            },
        };
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"v":1,"msg":{"response":{"id":9,"response":{"databases":["db"]}}}}"#
        );
        let s = ServerFrame {
            v: 1,
            msg: ServerMessage::Response {
                id: 3,
                response: Response::Arbitration { granted: true },
            },
        };
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"v":1,"msg":{"response":{"id":3,"response":{"arbitration":{"granted":true}}}}}"#
        );
        let f = ClientFrame {
            v: 1,
            id: 10,
            request: Request::Users(UsersRequest::Grant {
                accounts: vec![AccountName::new("app", "%")],
                level: GrantLevel::Database("shop".into()),
            }),
        };
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"v":1,"id":10,"request":{"users":{"grant":{"accounts":[{"user":"app","host":"%"}],"level":{"database":"shop"}}}}}"#
        );
        let s = ServerFrame {
            v: 1,
            msg: ServerMessage::Response {
                id: 10,
                response: Response::Accounts(vec![UserAccount {
                    user: "root".into(),
                    host: "localhost".into(),
                    password: None,
                    grants: Grants {
                        all_databases: true,
                        databases: BTreeSet::new(),
                    },
                }]),
            },
        };
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"v":1,"msg":{"response":{"id":10,"response":{"accounts":[{"user":"root","host":"localhost","password":null,"grants":{"all_databases":true,"databases":[]}}]}}}}"#
        );
        // A password shows in no Debug output.
        let p = StoredPassword {
            native: "A".repeat(40),
            sha256: None,
        };
        assert_eq!(format!("{p:?}"), "StoredPassword(..)");
        // A status from a node that knows nothing of start phases decodes.
        let st: NodeStatus = serde_json::from_str(
            r#"{"state":"starting","data_memory_used_bytes":0,"data_memory_total_bytes":0,"rows":0,"client_connections":0}"#,
        )
        .unwrap();
        assert_eq!(st.start_phase, None);
        let e: ShoalError = WireError {
            code: 723,
            detail: "x".into(),
        }
        .into();
        assert_eq!(e.code, ErrorCode::NoSuchTable);
        let e: ShoalError = WireError {
            code: 1,
            detail: "x".into(),
        }
        .into();
        assert_eq!(e.code, ErrorCode::Internal);
    }
}
