//! Cluster configuration: one TOML file read by mgmd, with NDB's concepts
//! under snake_case names (`docs/CONFIG.md` lists every key, its default and
//! its NDB name).
//!
//! Layout of the file:
//!
//! ```toml
//! [system]              # cluster-wide and mgmd settings (NDB [system], [ndb_mgmd])
//! cluster_id = 1
//! [datanode_defaults]   # settings shared by every data node (NDB [ndbd default])
//! no_of_replicas = 2
//! data_memory = "512M"
//! [[node]]              # one per node (NDB [ndb_mgmd], [ndbd], [api])
//! node_id = 1
//! type = "datanode"
//! host = "127.0.0.1"
//! ```
//!
//! Invariants of a [`ClusterConfig`] that passed [`ClusterConfig::validate`]:
//! node ids are unique and in 1..=255, there is exactly one mgmd and at
//! least one data node, the data node count is a multiple of
//! `no_of_replicas` (1..=4), and every limit is non-zero.

use serde::{Deserialize, Serialize};
use shoal_types::{ErrorCode, ShoalError};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Node kind strings used in `[[node]] type = ...`.
pub const KIND_MGMD: &str = "mgmd";
pub const KIND_DATANODE: &str = "datanode";
pub const KIND_API: &str = "api";

/// The largest node id (as in NDB).
pub const NODE_ID_MAX: u16 = 255;
/// mgmd's port when its `[[node]]` section gives none (NDB's 1186).
pub const MGMD_PORT_DEFAULT: u16 = 1186;
/// The node id `ClusterConfig::local` gives the mgmd when there are at most
/// 48 data nodes: NDB's data node ids end at 48, so 49 is the customary
/// first id of a non-data node and leaves 1..=48 free for data nodes added
/// later.
pub const LOCAL_MGMD_NODE_ID: u16 = 49;

/// Upper bounds some keys must respect. The data-node wire protocol
/// (`shoal-wire`) caps frames at 8 MiB and 16 Ki signals; a config asking for
/// more could never be honoured, so it is rejected here.
const WIRE_FRAME_BYTES_MAX: u32 = 8 * 1024 * 1024;
const WIRE_SIGNALS_PER_FRAME_MAX: u32 = 16 * 1024;

/// A node section of the config file (`[[node]]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeSection {
    pub node_id: u16,
    /// "mgmd" | "datanode" | "api"
    #[serde(rename = "type")]
    pub kind: String,
    pub host: String,
    /// Listening port (mgmd, data nodes). 0 = pick a free port at start.
    #[serde(default)]
    pub port: u16,
    /// Data node only: overrides `[datanode_defaults]` data_dir.
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    /// Data node only: its node group (NDB's `Nodegroup`). Either every
    /// data node names one or none does (then groups follow node-id order).
    #[serde(default)]
    pub nodegroup: Option<u16>,
}

/// The effective settings of one data node, as served to it at start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataNodeConfig {
    pub node_id: u16,
    /// Every data node of the cluster, by id.
    #[serde(default)]
    pub cluster_data_nodes: Vec<u16>,
    pub host: String,
    pub port: u16,
    pub data_dir: PathBuf,
    pub data_memory_bytes: u64,
    pub threads: u32,
    pub max_concurrent_transactions: u32,
    /// NDB: MaxNoOfConcurrentScans. Scans a data node coordinates at once.
    #[serde(default = "default_max_concurrent_scans")]
    pub max_concurrent_scans: u32,
    pub max_concurrent_operations: u32,
    pub max_operations_per_transaction: u32,
    pub deadlock_timeout_ms: u64,
    pub transaction_inactive_timeout_ms: u64,
    pub max_frame_bytes: u32,
    pub max_signals_per_frame: u32,
    pub max_client_connections: u32,
    /// Microseconds the event loop keeps polling without sleeping after
    /// work arrived (0 = sleep at once).
    #[serde(default)]
    pub spin_us: u32,
    /// Interval of heartbeats between data nodes; a node that misses
    /// [`HEARTBEAT_MISSED_MAX`] in a row is declared failed (NDB:
    /// HeartbeatIntervalDbDb). The serde defaults below keep a config
    /// served by an older mgmd usable.
    #[serde(default = "defaults::heartbeat_interval_ms")]
    pub heartbeat_interval_ms: u64,
    /// How long a side of a split waits for the arbitrator's answer before
    /// it counts as refused and shuts down (NDB: ArbitrationTimeout).
    #[serde(default = "defaults::arbitration_timeout_ms")]
    pub arbitration_timeout_ms: u64,
    /// An initial start waits this long for every configured data node,
    /// then starts with the nodes present if they are a majority covering
    /// every node group. 0 = wait for all nodes forever (NDB:
    /// StartPartialTimeout).
    #[serde(default = "defaults::start_partial_timeout_ms")]
    pub start_partial_timeout_ms: u64,
    /// Rate at which a restarting node's fragments are copied to it, in
    /// bytes per second. 0 = as fast as possible.
    #[serde(default = "defaults::restart_copy_bytes_per_sec")]
    pub restart_copy_bytes_per_sec: u64,
    /// Rows a data node adds to a new ordered index per tick while it
    /// builds it online (the rest of a tick serves traffic).
    #[serde(default = "defaults::index_build_rows_per_tick")]
    pub index_build_rows_per_tick: u32,
    /// Keep rows in memory only: no redo log, no epochs; a restart of the
    /// whole cluster starts empty (NDB: Diskless).
    #[serde(default)]
    pub diskless: bool,
    /// How often a new epoch starts: a whole-cluster crash loses at most
    /// the last epochs not yet durable (NDB: TimeBetweenEpochs).
    #[serde(default = "defaults::epoch_interval_ms")]
    pub epoch_interval_ms: u64,
    /// Space of a data node's redo log: checkpoints start as it fills, and
    /// writes are refused (410) when it is nearly full.
    #[serde(default = "defaults::redo_log_bytes")]
    pub redo_log_bytes: u64,
    /// The rate local checkpoints write at while the redo log has room.
    /// 0 = as fast as possible.
    #[serde(default = "defaults::checkpoint_bytes_per_sec")]
    pub checkpoint_bytes_per_sec: u64,
    /// How large the partial checkpoints after a full one may grow, in
    /// percent of it, before the next is full (RonDB: RecoveryWork).
    #[serde(default = "defaults::checkpoint_recovery_work_pct")]
    pub checkpoint_recovery_work_pct: u32,
    /// The node groups (data node ids), as [`ClusterConfig::node_groups`].
    #[serde(default)]
    pub node_groups: Vec<Vec<u16>>,
}

/// Heartbeats a data node may miss in a row before the others declare it
/// failed (NDB declares a node dead after missing its fourth heartbeat).
pub const HEARTBEAT_MISSED_MAX: u32 = 4;

/// The whole cluster configuration, flattened: the file's `[system]` and
/// `[datanode_defaults]` keys become fields, `[[node]]` becomes `nodes`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterConfig {
    // ---- [system] ----
    /// Identifies the cluster; nodes of another cluster are refused in the
    /// data-node handshake.
    pub cluster_id: u64,
    /// Base directory: mgmd keeps its files in `<data_dir>/mgmd-<id>` unless
    /// its `[[node]]` names a `data_dir`; data nodes default under it too.
    pub data_dir: PathBuf,
    /// How long mgmd waits for every data node to acknowledge a schema change.
    pub schema_ack_timeout_ms: u64,
    /// Most simultaneous connections mgmd accepts (nodes, clients, `shoal mgm`).
    pub mgmd_max_connections: u32,

    // ---- [datanode_defaults] ----
    /// Base directory of data nodes (`<dir>/datanode-<id>`); `None` = `data_dir`.
    pub datanode_data_dir: Option<PathBuf>,
    pub no_of_replicas: u32,
    pub data_memory_bytes: u64,
    pub threads: u32,
    pub deadlock_timeout_ms: u64,
    /// 0 = never time out an idle transaction.
    pub transaction_inactive_timeout_ms: u64,
    pub max_concurrent_transactions: u32,
    /// NDB: MaxNoOfConcurrentScans. Scans a data node coordinates at once.
    #[serde(default = "default_max_concurrent_scans")]
    pub max_concurrent_scans: u32,
    pub max_concurrent_operations: u32,
    pub max_operations_per_transaction: u32,
    /// NDB: HeartbeatIntervalDbDb. 4 missed beats declare a node failed.
    pub heartbeat_interval_ms: u64,
    /// NDB: ArbitrationTimeout.
    pub arbitration_timeout_ms: u64,
    /// NDB: StartPartialTimeout; 0 = wait for every data node forever.
    pub start_partial_timeout_ms: u64,
    /// Copy rate to a restarting node; 0 = unthrottled.
    pub restart_copy_bytes_per_sec: u64,
    /// Rows per tick of an online ordered-index build (≥ 1).
    pub index_build_rows_per_tick: u32,
    /// NDB: Diskless. No redo log and no epochs.
    pub diskless: bool,
    /// NDB: TimeBetweenEpochs.
    pub epoch_interval_ms: u64,
    /// NDB: NoOfFragmentLogFiles × FragmentLogFileSize.
    pub redo_log_bytes: u64,
    /// NDB: MaxDiskWriteSpeed; 0 = unthrottled.
    pub checkpoint_bytes_per_sec: u64,
    /// RonDB: RecoveryWork. The partial checkpoints of a chain hold at
    /// most this percent of its full one's size (a restart reads up to
    /// 1 + this/100 images of the rows; lower: shorter restarts, more
    /// checkpoint writing).
    pub checkpoint_recovery_work_pct: u32,
    pub max_frame_bytes: u32,
    pub max_signals_per_frame: u32,
    pub max_client_connections: u32,
    /// NDB: SpinMethod / SchedulerSpinTimer. Trades a busy core for
    /// lower latency; 0 = off.
    pub spin_us: u32,
    /// NDB: PartitionsPerNode. A table's default fragment count is this
    /// times the number of data nodes.
    pub partitions_per_node: u32,

    // ---- [[node]] ----
    pub nodes: Vec<NodeSection>,
}

/// Longest allowed `spin_us` (10 ms).
pub const SPIN_US_MAX: u32 = 10_000;
/// Range of `heartbeat_interval_ms`: below 10 ms a busy node misses beats
/// for scheduling hiccups; above a minute a dead node holds its
/// transactions' locks for minutes.
pub const HEARTBEAT_INTERVAL_MS_MIN: u64 = 10;
pub const HEARTBEAT_INTERVAL_MS_MAX: u64 = 60_000;
/// Range of `arbitration_timeout_ms`: the cluster stands still while it
/// waits, so more than 5 minutes is never what anyone wants.
pub const ARBITRATION_TIMEOUT_MS_MIN: u64 = 10;
pub const ARBITRATION_TIMEOUT_MS_MAX: u64 = 300_000;
/// Longest `start_partial_timeout_ms` (a day; 0 = forever is separate).
pub const START_PARTIAL_TIMEOUT_MS_MAX: u64 = 86_400_000;
/// Range of `epoch_interval_ms`: shorter, the epoch protocol's messages
/// and syncs dominate; longer, a crash of the whole cluster loses more.
pub const EPOCH_INTERVAL_MS_MIN: u64 = 10;
pub const EPOCH_INTERVAL_MS_MAX: u64 = 10_000;
/// Smallest `redo_log_size` (16 MiB, four of the log's files): smaller, a
/// checkpoint could not free space as fast as a burst of writes fills it.
pub const REDO_LOG_BYTES_MIN: u64 = 16 * 1024 * 1024;
/// Slowest non-zero `checkpoint_bytes_per_sec` (1 MiB/s).
pub const CHECKPOINT_BYTES_PER_SEC_MIN: u64 = 1024 * 1024;
/// The range of `checkpoint_recovery_work_pct`: under 10 % nearly every
/// checkpoint would be full; over 100 % a chain would hold more than two
/// images.
pub const CHECKPOINT_RECOVERY_WORK_PCT_RANGE: std::ops::RangeInclusive<u32> = 10..=100;

/// Slowest non-zero `restart_copy_bytes_per_sec` (64 KiB/s): slower, a
/// node restart of even a small node would take days.
pub const RESTART_COPY_BYTES_PER_SEC_MIN: u64 = 64 * 1024;
/// The smallest `max_frame_bytes`: room for the largest row (30000 bytes)
/// in one signal, with its headers, in both directions.
pub const MAX_FRAME_BYTES_MIN: u32 = 64 * 1024;

/// Defaults of every optional key, in one place (docs/CONFIG.md mirrors it).
fn default_max_concurrent_scans() -> u32 {
    defaults::MAX_CONCURRENT_SCANS
}

pub mod defaults {
    pub const CLUSTER_ID: u64 = 1;
    pub const DATA_DIR: &str = "shoal-data";
    pub const SCHEMA_ACK_TIMEOUT_MS: u64 = 10_000;
    pub const MGMD_MAX_CONNECTIONS: u32 = 256;
    pub const NO_OF_REPLICAS: u32 = 2;
    pub const DATA_MEMORY_BYTES: u64 = 512 * 1024 * 1024;
    pub const THREADS: u32 = 2;
    pub const DEADLOCK_TIMEOUT_MS: u64 = 1200;
    pub const TRANSACTION_INACTIVE_TIMEOUT_MS: u64 = 0;
    pub const MAX_CONCURRENT_TRANSACTIONS: u32 = 4096;
    pub const MAX_CONCURRENT_SCANS: u32 = 256;
    pub const MAX_CONCURRENT_OPERATIONS: u32 = 32768;
    pub const MAX_OPERATIONS_PER_TRANSACTION: u32 = 32768;
    pub const HEARTBEAT_INTERVAL_MS: u64 = 1500;
    pub const ARBITRATION_TIMEOUT_MS: u64 = 7500;
    pub const START_PARTIAL_TIMEOUT_MS: u64 = 30_000;
    pub const RESTART_COPY_BYTES_PER_SEC: u64 = 64 * 1024 * 1024;
    /// About 10 ms of work a tick: other traffic waits at most that.
    pub const INDEX_BUILD_ROWS_PER_TICK: u32 = 16 * 1024;
    pub const MAX_FRAME_BYTES: u32 = 8 * 1024 * 1024;
    pub const MAX_SIGNALS_PER_FRAME: u32 = 16 * 1024;
    pub const MAX_CLIENT_CONNECTIONS: u32 = 1024;
    pub const SPIN_US: u32 = 0;
    pub const PARTITIONS_PER_NODE: u32 = 2;
    pub const EPOCH_INTERVAL_MS: u64 = 100;
    pub const REDO_LOG_BYTES: u64 = 1024 * 1024 * 1024;
    pub const CHECKPOINT_BYTES_PER_SEC: u64 = 64 * 1024 * 1024;
    pub const CHECKPOINT_RECOVERY_WORK_PCT: u32 = 50;

    // For serde defaults of DataNodeConfig fields.
    pub fn heartbeat_interval_ms() -> u64 {
        HEARTBEAT_INTERVAL_MS
    }
    pub fn arbitration_timeout_ms() -> u64 {
        ARBITRATION_TIMEOUT_MS
    }
    pub fn start_partial_timeout_ms() -> u64 {
        START_PARTIAL_TIMEOUT_MS
    }
    pub fn restart_copy_bytes_per_sec() -> u64 {
        RESTART_COPY_BYTES_PER_SEC
    }
    pub fn index_build_rows_per_tick() -> u32 {
        INDEX_BUILD_ROWS_PER_TICK
    }
    pub fn epoch_interval_ms() -> u64 {
        EPOCH_INTERVAL_MS
    }
    pub fn redo_log_bytes() -> u64 {
        REDO_LOG_BYTES
    }
    pub fn checkpoint_bytes_per_sec() -> u64 {
        CHECKPOINT_BYTES_PER_SEC
    }
    pub fn checkpoint_recovery_work_pct() -> u32 {
        CHECKPOINT_RECOVERY_WORK_PCT
    }
}

// ----------------------------------------------------------------------------
// The file form. Separate structs so the file layout (sections, optional
// keys, "512M" sizes) stays independent of the flat in-memory form, and so
// `deny_unknown_fields` can name a misspelt key.

#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    system: FileSystem,
    #[serde(default)]
    datanode_defaults: FileDataNodeDefaults,
    #[serde(default)]
    node: Vec<FileNode>,
}

#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSystem {
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schema_ack_timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mgmd_max_connections: Option<u32>,
}

#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDataNodeDefaults {
    #[serde(skip_serializing_if = "Option::is_none")]
    no_of_replicas: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data_memory: Option<ByteSize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    threads: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deadlock_timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    transaction_inactive_timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_concurrent_transactions: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_concurrent_scans: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_concurrent_operations: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_operations_per_transaction: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    heartbeat_interval_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arbitration_timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_partial_timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    restart_copy_bytes_per_sec: Option<ByteSize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    index_build_rows_per_tick: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    diskless: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    epoch_interval_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    redo_log_size: Option<ByteSize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    checkpoint_bytes_per_sec: Option<ByteSize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    checkpoint_recovery_work_pct: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_frame_bytes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_signals_per_frame: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_client_connections: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    spin_us: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    partitions_per_node: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data_dir: Option<PathBuf>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileNode {
    node_id: u16,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data_dir: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nodegroup: Option<u16>,
}

/// A byte count written either as an integer or as a string with an
/// optional binary suffix: "98M", "1G", "64K", "1T", "1048576".
#[derive(Clone, Copy, Debug, PartialEq)]
struct ByteSize(u64);

impl Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_byte_size(self.0))
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ByteSize;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a byte count: an integer or a string like \"512M\" or \"1G\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("byte count must not be negative, got {v}")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ByteSize, E> {
                parse_byte_size(v).map(ByteSize).map_err(E::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Parses "512M", "1G", "64k", "1T" (binary multiples, as NDB) or a plain
/// number of bytes.
pub fn parse_byte_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("bad size {s:?}: suffix must be K, M, G or T")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "bad size {s:?}: expected digits with an optional K/M/G/T suffix"
        ));
    }
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("bad size {s:?}: number too large"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("bad size {s:?}: more than 2^64 bytes"))
}

/// The shortest exact spelling of a byte count ("512M", "1G", "12345").
pub fn format_byte_size(bytes: u64) -> String {
    for (shift, suffix) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        let unit = 1u64 << shift;
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

fn config_error(detail: impl Into<String>) -> ShoalError {
    // A bad config file is an mgmd start failure: the caller prints it and
    // exits; MgmdFailure is the registry's code for "mgmd cannot work".
    ShoalError::with_detail(ErrorCode::MgmdFailure, detail)
}

impl ClusterConfig {
    /// Parses and validates a config file's text. Unknown keys are errors
    /// that name the key (a misspelt limit silently ignored would be worse).
    pub fn from_toml_str(s: &str) -> Result<ClusterConfig, ShoalError> {
        let file: FileConfig = toml::from_str(s)
            .map_err(|e| config_error(format!("invalid config: {}", e.to_string().trim_end())))?;
        let sys = file.system;
        let dn = file.datanode_defaults;
        let mut nodes = Vec::with_capacity(file.node.len());
        for n in file.node {
            let port = match (n.port, n.kind.as_str()) {
                (Some(p), _) => p,
                (None, KIND_MGMD) => MGMD_PORT_DEFAULT,
                (None, _) => 0,
            };
            nodes.push(NodeSection {
                node_id: n.node_id,
                kind: n.kind,
                host: n.host.unwrap_or_else(|| "127.0.0.1".to_string()),
                port,
                data_dir: n.data_dir,
                nodegroup: n.nodegroup,
            });
        }
        let cfg = ClusterConfig {
            cluster_id: sys.cluster_id.unwrap_or(defaults::CLUSTER_ID),
            data_dir: sys
                .data_dir
                .unwrap_or_else(|| PathBuf::from(defaults::DATA_DIR)),
            schema_ack_timeout_ms: sys
                .schema_ack_timeout_ms
                .unwrap_or(defaults::SCHEMA_ACK_TIMEOUT_MS),
            mgmd_max_connections: sys
                .mgmd_max_connections
                .unwrap_or(defaults::MGMD_MAX_CONNECTIONS),
            datanode_data_dir: dn.data_dir,
            no_of_replicas: dn.no_of_replicas.unwrap_or(defaults::NO_OF_REPLICAS),
            data_memory_bytes: dn
                .data_memory
                .map(|b| b.0)
                .unwrap_or(defaults::DATA_MEMORY_BYTES),
            threads: dn.threads.unwrap_or(defaults::THREADS),
            deadlock_timeout_ms: dn
                .deadlock_timeout_ms
                .unwrap_or(defaults::DEADLOCK_TIMEOUT_MS),
            transaction_inactive_timeout_ms: dn
                .transaction_inactive_timeout_ms
                .unwrap_or(defaults::TRANSACTION_INACTIVE_TIMEOUT_MS),
            max_concurrent_transactions: dn
                .max_concurrent_transactions
                .unwrap_or(defaults::MAX_CONCURRENT_TRANSACTIONS),
            max_concurrent_scans: dn
                .max_concurrent_scans
                .unwrap_or(defaults::MAX_CONCURRENT_SCANS),
            max_concurrent_operations: dn
                .max_concurrent_operations
                .unwrap_or(defaults::MAX_CONCURRENT_OPERATIONS),
            max_operations_per_transaction: dn
                .max_operations_per_transaction
                .unwrap_or(defaults::MAX_OPERATIONS_PER_TRANSACTION),
            heartbeat_interval_ms: dn
                .heartbeat_interval_ms
                .unwrap_or(defaults::HEARTBEAT_INTERVAL_MS),
            arbitration_timeout_ms: dn
                .arbitration_timeout_ms
                .unwrap_or(defaults::ARBITRATION_TIMEOUT_MS),
            start_partial_timeout_ms: dn
                .start_partial_timeout_ms
                .unwrap_or(defaults::START_PARTIAL_TIMEOUT_MS),
            restart_copy_bytes_per_sec: dn
                .restart_copy_bytes_per_sec
                .map(|b| b.0)
                .unwrap_or(defaults::RESTART_COPY_BYTES_PER_SEC),
            index_build_rows_per_tick: dn
                .index_build_rows_per_tick
                .unwrap_or(defaults::INDEX_BUILD_ROWS_PER_TICK),
            diskless: dn.diskless.unwrap_or(false),
            epoch_interval_ms: dn.epoch_interval_ms.unwrap_or(defaults::EPOCH_INTERVAL_MS),
            redo_log_bytes: dn
                .redo_log_size
                .map(|b| b.0)
                .unwrap_or(defaults::REDO_LOG_BYTES),
            checkpoint_bytes_per_sec: dn
                .checkpoint_bytes_per_sec
                .map(|b| b.0)
                .unwrap_or(defaults::CHECKPOINT_BYTES_PER_SEC),
            checkpoint_recovery_work_pct: dn
                .checkpoint_recovery_work_pct
                .unwrap_or(defaults::CHECKPOINT_RECOVERY_WORK_PCT),
            max_frame_bytes: dn.max_frame_bytes.unwrap_or(defaults::MAX_FRAME_BYTES),
            max_signals_per_frame: dn
                .max_signals_per_frame
                .unwrap_or(defaults::MAX_SIGNALS_PER_FRAME),
            max_client_connections: dn
                .max_client_connections
                .unwrap_or(defaults::MAX_CLIENT_CONNECTIONS),
            spin_us: dn.spin_us.unwrap_or(defaults::SPIN_US),
            partitions_per_node: dn
                .partitions_per_node
                .unwrap_or(defaults::PARTITIONS_PER_NODE),
            nodes,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads, parses and validates a config file.
    pub fn load(path: &Path) -> Result<ClusterConfig, ShoalError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            config_error(format!("cannot read config file {}: {e}", path.display()))
        })?;
        ClusterConfig::from_toml_str(&text)
            .map_err(|e| config_error(format!("config file {}: {}", path.display(), e.detail)))
    }

    /// The config as a file, every key written out explicitly, so the file
    /// `shoal up` leaves behind documents the values it ran with.
    pub fn to_toml(&self) -> String {
        let file = FileConfig {
            system: FileSystem {
                cluster_id: Some(self.cluster_id),
                data_dir: Some(self.data_dir.clone()),
                schema_ack_timeout_ms: Some(self.schema_ack_timeout_ms),
                mgmd_max_connections: Some(self.mgmd_max_connections),
            },
            datanode_defaults: FileDataNodeDefaults {
                no_of_replicas: Some(self.no_of_replicas),
                data_memory: Some(ByteSize(self.data_memory_bytes)),
                threads: Some(self.threads),
                deadlock_timeout_ms: Some(self.deadlock_timeout_ms),
                transaction_inactive_timeout_ms: Some(self.transaction_inactive_timeout_ms),
                max_concurrent_transactions: Some(self.max_concurrent_transactions),
                max_concurrent_scans: Some(self.max_concurrent_scans),
                max_concurrent_operations: Some(self.max_concurrent_operations),
                max_operations_per_transaction: Some(self.max_operations_per_transaction),
                heartbeat_interval_ms: Some(self.heartbeat_interval_ms),
                arbitration_timeout_ms: Some(self.arbitration_timeout_ms),
                start_partial_timeout_ms: Some(self.start_partial_timeout_ms),
                restart_copy_bytes_per_sec: Some(ByteSize(self.restart_copy_bytes_per_sec)),
                index_build_rows_per_tick: Some(self.index_build_rows_per_tick),
                diskless: Some(self.diskless),
                epoch_interval_ms: Some(self.epoch_interval_ms),
                redo_log_size: Some(ByteSize(self.redo_log_bytes)),
                checkpoint_bytes_per_sec: Some(ByteSize(self.checkpoint_bytes_per_sec)),
                checkpoint_recovery_work_pct: Some(self.checkpoint_recovery_work_pct),
                max_frame_bytes: Some(self.max_frame_bytes),
                max_signals_per_frame: Some(self.max_signals_per_frame),
                max_client_connections: Some(self.max_client_connections),
                spin_us: Some(self.spin_us),
                partitions_per_node: Some(self.partitions_per_node),
                data_dir: self.datanode_data_dir.clone(),
            },
            node: self
                .nodes
                .iter()
                .map(|n| FileNode {
                    node_id: n.node_id,
                    kind: n.kind.clone(),
                    host: Some(n.host.clone()),
                    port: Some(n.port),
                    data_dir: n.data_dir.clone(),
                    nodegroup: n.nodegroup,
                })
                .collect(),
        };
        let body = toml::to_string(&file).expect("config serializes to TOML");
        format!("# Shoal cluster configuration (see docs/CONFIG.md).\n\n{body}")
    }

    /// The config `shoal up` writes: `data_nodes` data nodes with ids
    /// 1..=data_nodes (so node groups follow id order, as in NDB), all on
    /// 127.0.0.1 with port 0 (a free port at start; set `nodes[i].port` for
    /// fixed ones), and one mgmd with id 49 ([`LOCAL_MGMD_NODE_ID`]; id
    /// `data_nodes + 1` if there are more than 48 data nodes) on `mgm_port`.
    /// No API sections: API nodes get ids from 50 up. mgmd keeps its files in
    /// `<data_dir>/mgmd-49`, data node N in `<data_dir>/datanode-N`.
    ///
    /// It is not validated (e.g. a data node count that is not a multiple of
    /// `replicas`); call [`ClusterConfig::validate`] on user input.
    pub fn local(data_nodes: u32, replicas: u32, mgm_port: u16, data_dir: &Path) -> ClusterConfig {
        let data_nodes_u16 = u16::try_from(data_nodes).unwrap_or(u16::MAX);
        let mgmd_id = if data_nodes_u16 < LOCAL_MGMD_NODE_ID {
            LOCAL_MGMD_NODE_ID
        } else {
            data_nodes_u16.saturating_add(1)
        };
        let mut nodes = vec![NodeSection {
            node_id: mgmd_id,
            kind: KIND_MGMD.to_string(),
            host: "127.0.0.1".to_string(),
            port: mgm_port,
            data_dir: None,
            nodegroup: None,
        }];
        for id in 1..=data_nodes_u16 {
            nodes.push(NodeSection {
                node_id: id,
                kind: KIND_DATANODE.to_string(),
                host: "127.0.0.1".to_string(),
                port: 0,
                data_dir: None,
                nodegroup: None,
            });
        }
        ClusterConfig {
            cluster_id: defaults::CLUSTER_ID,
            data_dir: data_dir.to_path_buf(),
            schema_ack_timeout_ms: defaults::SCHEMA_ACK_TIMEOUT_MS,
            mgmd_max_connections: defaults::MGMD_MAX_CONNECTIONS,
            datanode_data_dir: None,
            no_of_replicas: replicas,
            data_memory_bytes: defaults::DATA_MEMORY_BYTES,
            threads: defaults::THREADS,
            deadlock_timeout_ms: defaults::DEADLOCK_TIMEOUT_MS,
            transaction_inactive_timeout_ms: defaults::TRANSACTION_INACTIVE_TIMEOUT_MS,
            max_concurrent_transactions: defaults::MAX_CONCURRENT_TRANSACTIONS,
            max_concurrent_scans: defaults::MAX_CONCURRENT_SCANS,
            max_concurrent_operations: defaults::MAX_CONCURRENT_OPERATIONS,
            max_operations_per_transaction: defaults::MAX_OPERATIONS_PER_TRANSACTION,
            heartbeat_interval_ms: defaults::HEARTBEAT_INTERVAL_MS,
            arbitration_timeout_ms: defaults::ARBITRATION_TIMEOUT_MS,
            start_partial_timeout_ms: defaults::START_PARTIAL_TIMEOUT_MS,
            restart_copy_bytes_per_sec: defaults::RESTART_COPY_BYTES_PER_SEC,
            index_build_rows_per_tick: defaults::INDEX_BUILD_ROWS_PER_TICK,
            diskless: false,
            epoch_interval_ms: defaults::EPOCH_INTERVAL_MS,
            redo_log_bytes: defaults::REDO_LOG_BYTES,
            checkpoint_bytes_per_sec: defaults::CHECKPOINT_BYTES_PER_SEC,
            checkpoint_recovery_work_pct: defaults::CHECKPOINT_RECOVERY_WORK_PCT,
            max_frame_bytes: defaults::MAX_FRAME_BYTES,
            max_signals_per_frame: defaults::MAX_SIGNALS_PER_FRAME,
            max_client_connections: defaults::MAX_CLIENT_CONNECTIONS,
            spin_us: defaults::SPIN_US,
            partitions_per_node: defaults::PARTITIONS_PER_NODE,
            nodes,
        }
    }

    /// Checks every rule of the module's invariants; the error says which
    /// rule and which node.
    pub fn validate(&self) -> Result<(), ShoalError> {
        let mut ids = BTreeSet::new();
        let mut endpoints = BTreeSet::new();
        for n in &self.nodes {
            if n.node_id == 0 || n.node_id > NODE_ID_MAX {
                return Err(config_error(format!(
                    "node id {} is out of range 1..={NODE_ID_MAX}",
                    n.node_id
                )));
            }
            if !ids.insert(n.node_id) {
                return Err(config_error(format!(
                    "node id {} appears in more than one [[node]] section",
                    n.node_id
                )));
            }
            if ![KIND_MGMD, KIND_DATANODE, KIND_API].contains(&n.kind.as_str()) {
                return Err(config_error(format!(
                    "node {}: type {:?} is not one of \"mgmd\", \"datanode\", \"api\"",
                    n.node_id, n.kind
                )));
            }
            if n.host.is_empty() {
                return Err(config_error(format!("node {}: host is empty", n.node_id)));
            }
            if n.kind != KIND_API && n.port != 0 && !endpoints.insert((n.host.clone(), n.port)) {
                return Err(config_error(format!(
                    "node {}: {}:{} is already used by another node",
                    n.node_id, n.host, n.port
                )));
            }
        }
        let mgmds = self.nodes.iter().filter(|n| n.kind == KIND_MGMD).count();
        if mgmds != 1 {
            return Err(config_error(format!(
                "the config needs exactly one [[node]] with type = \"mgmd\", found {mgmds}"
            )));
        }
        if !(1..=4).contains(&self.no_of_replicas) {
            return Err(config_error(format!(
                "no_of_replicas must be 1..=4, got {}",
                self.no_of_replicas
            )));
        }
        let data_nodes = self.data_node_ids().len();
        if data_nodes == 0 {
            return Err(config_error(
                "the config needs at least one [[node]] with type = \"datanode\"",
            ));
        }
        if !data_nodes.is_multiple_of(self.no_of_replicas as usize) {
            return Err(config_error(format!(
                "{data_nodes} data node(s) is not a multiple of no_of_replicas = {} \
                 (each node group holds no_of_replicas data nodes)",
                self.no_of_replicas
            )));
        }
        let nonzero: [(&str, u64); 12] = [
            ("data_memory", self.data_memory_bytes),
            ("threads", self.threads.into()),
            ("deadlock_timeout_ms", self.deadlock_timeout_ms),
            (
                "max_concurrent_transactions",
                self.max_concurrent_transactions.into(),
            ),
            ("max_concurrent_scans", self.max_concurrent_scans.into()),
            (
                "max_concurrent_operations",
                self.max_concurrent_operations.into(),
            ),
            (
                "max_operations_per_transaction",
                self.max_operations_per_transaction.into(),
            ),
            ("max_frame_bytes", self.max_frame_bytes.into()),
            ("max_signals_per_frame", self.max_signals_per_frame.into()),
            ("max_client_connections", self.max_client_connections.into()),
            ("partitions_per_node", self.partitions_per_node.into()),
            ("schema_ack_timeout_ms", self.schema_ack_timeout_ms),
        ];
        for (key, value) in nonzero {
            if value == 0 {
                return Err(config_error(format!("{key} must be greater than 0")));
            }
        }
        let default_fragments =
            u64::from(self.partitions_per_node) * self.data_node_ids().len() as u64;
        if default_fragments > u64::from(shoal_types::distribution::BUCKETS) {
            return Err(config_error(format!(
                "partitions_per_node ({}) × {} data nodes exceeds {} fragments per table",
                self.partitions_per_node,
                self.data_node_ids().len(),
                shoal_types::distribution::BUCKETS
            )));
        }
        let data_nodes: Vec<&NodeSection> = self
            .nodes
            .iter()
            .filter(|n| n.kind == KIND_DATANODE)
            .collect();
        let named = data_nodes.iter().filter(|n| n.nodegroup.is_some()).count();
        if named != 0 && named != data_nodes.len() {
            return Err(config_error(
                "give `nodegroup` for every data node or for none (then groups follow node-id order)",
            ));
        }
        if named != 0 {
            let groups = self.node_groups();
            let want = self.no_of_replicas as usize;
            for (i, g) in groups.iter().enumerate() {
                if g.len() != want {
                    return Err(config_error(format!(
                        "node group {i} has {} data node(s) ({g:?}); every group needs no_of_replicas = {want}",
                        g.len()
                    )));
                }
            }
            let mut ids: Vec<u16> = data_nodes.iter().filter_map(|n| n.nodegroup).collect();
            ids.sort_unstable();
            ids.dedup();
            if ids.iter().enumerate().any(|(i, &g)| g as usize != i) {
                return Err(config_error(format!(
                    "node groups must be numbered 0, 1, 2, ... without gaps; got {ids:?}"
                )));
            }
        }
        if self.spin_us > SPIN_US_MAX {
            return Err(config_error(format!(
                "spin_us ({}) is over {SPIN_US_MAX}: spinning longer than that only burns the core",
                self.spin_us
            )));
        }
        let ranges: [(&str, u64, u64, u64); 3] = [
            (
                "index_build_rows_per_tick",
                u64::from(self.index_build_rows_per_tick),
                1,
                1 << 20,
            ),
            (
                "heartbeat_interval_ms",
                self.heartbeat_interval_ms,
                HEARTBEAT_INTERVAL_MS_MIN,
                HEARTBEAT_INTERVAL_MS_MAX,
            ),
            (
                "arbitration_timeout_ms",
                self.arbitration_timeout_ms,
                ARBITRATION_TIMEOUT_MS_MIN,
                ARBITRATION_TIMEOUT_MS_MAX,
            ),
        ];
        for (key, value, min, max) in ranges {
            if !(min..=max).contains(&value) {
                return Err(config_error(format!(
                    "{key} must be {min}..={max}, got {value}"
                )));
            }
        }
        if self.start_partial_timeout_ms > START_PARTIAL_TIMEOUT_MS_MAX {
            return Err(config_error(format!(
                "start_partial_timeout_ms ({}) is over {START_PARTIAL_TIMEOUT_MS_MAX} (a day); \
                 use 0 to wait for every data node without a limit",
                self.start_partial_timeout_ms
            )));
        }
        if self.restart_copy_bytes_per_sec != 0
            && self.restart_copy_bytes_per_sec < RESTART_COPY_BYTES_PER_SEC_MIN
        {
            return Err(config_error(format!(
                "restart_copy_bytes_per_sec ({}) is under {} (64K): a node restart would take days; \
                 use 0 for no limit",
                self.restart_copy_bytes_per_sec, RESTART_COPY_BYTES_PER_SEC_MIN
            )));
        }
        if !(EPOCH_INTERVAL_MS_MIN..=EPOCH_INTERVAL_MS_MAX).contains(&self.epoch_interval_ms) {
            return Err(config_error(format!(
                "epoch_interval_ms must be {EPOCH_INTERVAL_MS_MIN}..={EPOCH_INTERVAL_MS_MAX} (got {}): \
                 it bounds what a crash of the whole cluster may lose",
                self.epoch_interval_ms
            )));
        }
        if self.redo_log_bytes < REDO_LOG_BYTES_MIN {
            return Err(config_error(format!(
                "redo_log_size ({}) is under {} (16M): checkpoints could not keep up with a burst of writes",
                self.redo_log_bytes, REDO_LOG_BYTES_MIN
            )));
        }
        if self.checkpoint_bytes_per_sec != 0
            && self.checkpoint_bytes_per_sec < CHECKPOINT_BYTES_PER_SEC_MIN
        {
            return Err(config_error(format!(
                "checkpoint_bytes_per_sec ({}) is under {} (1M): the redo log would fill before a checkpoint frees it; \
                 use 0 for no limit",
                self.checkpoint_bytes_per_sec, CHECKPOINT_BYTES_PER_SEC_MIN
            )));
        }
        if !CHECKPOINT_RECOVERY_WORK_PCT_RANGE.contains(&self.checkpoint_recovery_work_pct) {
            return Err(config_error(format!(
                "checkpoint_recovery_work_pct ({}) is outside {}..={}: it is the percent of a full checkpoint's size \
                 its partial ones may reach before the next is full",
                self.checkpoint_recovery_work_pct,
                CHECKPOINT_RECOVERY_WORK_PCT_RANGE.start(),
                CHECKPOINT_RECOVERY_WORK_PCT_RANGE.end()
            )));
        }
        if self.mgmd_max_connections == 0 {
            return Err(config_error("mgmd_max_connections must be greater than 0"));
        }
        if self.max_operations_per_transaction > self.max_concurrent_operations {
            return Err(config_error(format!(
                "max_operations_per_transaction ({}) exceeds max_concurrent_operations ({}): \
                 such a transaction could never run",
                self.max_operations_per_transaction, self.max_concurrent_operations
            )));
        }
        if self.max_frame_bytes < MAX_FRAME_BYTES_MIN {
            return Err(config_error(format!(
                "max_frame_bytes ({}) is under {MAX_FRAME_BYTES_MIN} (64K): a frame must hold the largest row ({} bytes) with its request and answer headers",
                self.max_frame_bytes,
                shoal_types::schema::ROW_BYTES_MAX
            )));
        }
        if self.max_frame_bytes > WIRE_FRAME_BYTES_MAX {
            return Err(config_error(format!(
                "max_frame_bytes ({}) exceeds the protocol limit {WIRE_FRAME_BYTES_MAX}",
                self.max_frame_bytes
            )));
        }
        if self.max_signals_per_frame > WIRE_SIGNALS_PER_FRAME_MAX {
            return Err(config_error(format!(
                "max_signals_per_frame ({}) exceeds the protocol limit {WIRE_SIGNALS_PER_FRAME_MAX}",
                self.max_signals_per_frame
            )));
        }
        Ok(())
    }

    /// The mgmd's `[[node]]` section. Panics if the config has none, which
    /// `validate` rules out.
    pub fn mgmd_node(&self) -> &NodeSection {
        self.nodes
            .iter()
            .find(|n| n.kind == KIND_MGMD)
            .expect("a validated config has one mgmd node")
    }

    /// "host:port" of the mgmd node.
    pub fn mgmd_addr(&self) -> String {
        let n = self.mgmd_node();
        format!("{}:{}", n.host, n.port)
    }

    /// The directory where mgmd keeps the schema.
    pub fn mgmd_data_dir(&self) -> PathBuf {
        let n = self.mgmd_node();
        n.data_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join(format!("mgmd-{}", n.node_id)))
    }

    /// Data node ids in ascending order.
    pub fn data_node_ids(&self) -> Vec<u16> {
        let mut ids: Vec<u16> = self
            .nodes
            .iter()
            .filter(|n| n.kind == KIND_DATANODE)
            .map(|n| n.node_id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Node groups as in NDB: the data nodes' `nodegroup` keys if they
    /// give them, else data nodes in id order, `no_of_replicas` per group
    /// (nodes 1,2 form group 0 and 3,4 group 1 with two replicas).
    pub fn node_groups(&self) -> Vec<Vec<u16>> {
        let explicit: Vec<(u16, u16)> = self
            .nodes
            .iter()
            .filter(|n| n.kind == KIND_DATANODE)
            .filter_map(|n| n.nodegroup.map(|g| (g, n.node_id)))
            .collect();
        if !explicit.is_empty() {
            let mut groups: std::collections::BTreeMap<u16, Vec<u16>> = Default::default();
            for (g, id) in explicit {
                groups.entry(g).or_default().push(id);
            }
            return groups
                .into_values()
                .map(|mut g| {
                    g.sort_unstable();
                    g
                })
                .collect();
        }
        // A validated config always forms whole groups; an unvalidated one
        // with a stray node count yields none.
        shoal_types::distribution::node_groups(
            &self.data_node_ids(),
            self.no_of_replicas.max(1) as usize,
        )
        .unwrap_or_default()
    }

    /// The distribution of a new table: every node group, and
    /// `fragment_count` fragments (default `partitions_per_node` × data
    /// nodes), which must divide evenly over the node groups.
    pub fn table_distribution(
        &self,
        fragment_count: Option<u32>,
    ) -> Result<shoal_types::distribution::DistributionSpec, ShoalError> {
        let groups = self.node_groups();
        let data_nodes = self.data_node_ids().len() as u32;
        let total = fragment_count.unwrap_or(self.partitions_per_node * data_nodes);
        if groups.is_empty() || total == 0 || !total.is_multiple_of(groups.len() as u32) {
            return Err(ShoalError::with_detail(
                ErrorCode::BadTableDefinition,
                format!(
                    "fragment_count {total} must be a positive multiple of the {} node group(s)",
                    groups.len()
                ),
            ));
        }
        let spec = shoal_types::distribution::DistributionSpec {
            version: 1,
            fragments_per_group: total / groups.len() as u32,
            node_groups: groups,
        };
        spec.map()
            .map_err(|e| ShoalError::with_detail(ErrorCode::BadTableDefinition, e.detail))?;
        Ok(spec)
    }

    /// The effective settings of data node `node_id`, or `None` if that id
    /// is not a data node in this config.
    pub fn data_node_config(&self, node_id: u16) -> Option<DataNodeConfig> {
        let n = self
            .nodes
            .iter()
            .find(|n| n.node_id == node_id && n.kind == KIND_DATANODE)?;
        let data_dir = n.data_dir.clone().unwrap_or_else(|| {
            self.datanode_data_dir
                .as_ref()
                .unwrap_or(&self.data_dir)
                .join(format!("datanode-{node_id}"))
        });
        Some(DataNodeConfig {
            node_id,
            cluster_data_nodes: self.data_node_ids(),
            host: n.host.clone(),
            port: n.port,
            data_dir,
            data_memory_bytes: self.data_memory_bytes,
            threads: self.threads,
            max_concurrent_transactions: self.max_concurrent_transactions,
            max_concurrent_scans: self.max_concurrent_scans,
            max_concurrent_operations: self.max_concurrent_operations,
            max_operations_per_transaction: self.max_operations_per_transaction,
            deadlock_timeout_ms: self.deadlock_timeout_ms,
            transaction_inactive_timeout_ms: self.transaction_inactive_timeout_ms,
            max_frame_bytes: self.max_frame_bytes,
            max_signals_per_frame: self.max_signals_per_frame,
            max_client_connections: self.max_client_connections,
            spin_us: self.spin_us,
            heartbeat_interval_ms: self.heartbeat_interval_ms,
            arbitration_timeout_ms: self.arbitration_timeout_ms,
            start_partial_timeout_ms: self.start_partial_timeout_ms,
            restart_copy_bytes_per_sec: self.restart_copy_bytes_per_sec,
            index_build_rows_per_tick: self.index_build_rows_per_tick,
            diskless: self.diskless,
            epoch_interval_ms: self.epoch_interval_ms,
            redo_log_bytes: self.redo_log_bytes,
            checkpoint_bytes_per_sec: self.checkpoint_bytes_per_sec,
            checkpoint_recovery_work_pct: self.checkpoint_recovery_work_pct,
            node_groups: self.node_groups(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[[node]]
node_id = 49
type = "mgmd"

[[node]]
node_id = 1
type = "datanode"

[[node]]
node_id = 2
type = "datanode"
"#;

    #[test]
    fn minimal_file_gets_defaults() {
        let c = ClusterConfig::from_toml_str(MINIMAL).unwrap();
        assert_eq!(c.cluster_id, 1);
        assert_eq!(c.no_of_replicas, 2);
        assert_eq!(c.data_memory_bytes, 512 << 20);
        assert_eq!(c.deadlock_timeout_ms, 1200);
        assert_eq!(c.transaction_inactive_timeout_ms, 0);
        assert_eq!(c.max_concurrent_transactions, 4096);
        assert_eq!(c.max_concurrent_operations, 32768);
        assert_eq!(c.mgmd_addr(), "127.0.0.1:1186");
        assert_eq!(c.mgmd_data_dir(), PathBuf::from("shoal-data/mgmd-49"));
        assert_eq!(c.data_node_ids(), vec![1, 2]);
        assert_eq!(c.node_groups(), vec![vec![1, 2]]);
        let d = c.data_node_config(2).unwrap();
        assert_eq!(d.port, 0);
        assert_eq!(d.data_dir, PathBuf::from("shoal-data/datanode-2"));
        assert_eq!(d.data_memory_bytes, 512 << 20);
        assert_eq!(d.heartbeat_interval_ms, 1500);
        assert_eq!(d.arbitration_timeout_ms, 7500);
        assert_eq!(d.start_partial_timeout_ms, 30_000);
        assert_eq!(d.restart_copy_bytes_per_sec, 64 << 20);
        assert_eq!(d.node_groups, vec![vec![1, 2]]);
        assert!(c.data_node_config(49).is_none(), "mgmd is not a data node");
        assert!(c.data_node_config(7).is_none());
    }

    #[test]
    fn full_file_parses() {
        let text = r#"
[system]
cluster_id = 77
data_dir = "/var/lib/shoal"
schema_ack_timeout_ms = 2000
mgmd_max_connections = 10

[datanode_defaults]
no_of_replicas = 1
data_memory = "98M"
threads = 4
deadlock_timeout_ms = 500
transaction_inactive_timeout_ms = 60000
max_concurrent_transactions = 100
max_concurrent_operations = 1000
max_operations_per_transaction = 10
heartbeat_interval_ms = 100
arbitration_timeout_ms = 2000
start_partial_timeout_ms = 0
restart_copy_bytes_per_sec = "10M"
max_frame_bytes = 65536
max_signals_per_frame = 64
max_client_connections = 8
spin_us = 250
data_dir = "/data"

[[node]]
node_id = 3
type = "mgmd"
host = "10.0.0.1"
port = 2000
data_dir = "/mgm"

[[node]]
node_id = 1
type = "datanode"
host = "10.0.0.2"
port = 3000

[[node]]
node_id = 2
type = "datanode"
host = "10.0.0.3"
port = 3000
data_dir = "/special"

[[node]]
node_id = 100
type = "api"
"#;
        let c = ClusterConfig::from_toml_str(text).unwrap();
        assert_eq!(c.cluster_id, 77);
        assert_eq!(c.data_memory_bytes, 98 << 20);
        assert_eq!(c.mgmd_addr(), "10.0.0.1:2000");
        assert_eq!(c.mgmd_data_dir(), PathBuf::from("/mgm"));
        let d1 = c.data_node_config(1).unwrap();
        assert_eq!(d1.data_dir, PathBuf::from("/data/datanode-1"));
        assert_eq!((d1.host.as_str(), d1.port), ("10.0.0.2", 3000));
        assert_eq!(d1.threads, 4);
        assert_eq!(d1.max_signals_per_frame, 64);
        assert_eq!(d1.spin_us, 250);
        assert_eq!(d1.heartbeat_interval_ms, 100);
        assert_eq!(d1.arbitration_timeout_ms, 2000);
        assert_eq!(d1.start_partial_timeout_ms, 0, "0 = wait for all forever");
        assert_eq!(d1.restart_copy_bytes_per_sec, 10 << 20);
        assert_eq!(d1.node_groups, vec![vec![1], vec![2]]);
        assert_eq!(
            c.data_node_config(2).unwrap().data_dir,
            PathBuf::from("/special")
        );
        assert_eq!(c.node_groups(), vec![vec![1], vec![2]]);
        // Round trip through the writer.
        let again = ClusterConfig::from_toml_str(&c.to_toml()).unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_byte_size("1G"), Ok(1 << 30));
        assert_eq!(parse_byte_size("64k"), Ok(64 << 10));
        assert_eq!(parse_byte_size("12345"), Ok(12345));
        assert!(parse_byte_size("12X").is_err());
        assert!(parse_byte_size("M").is_err());
        assert!(parse_byte_size("99999999999T").is_err());
        assert_eq!(format_byte_size(512 << 20), "512M");
        assert_eq!(format_byte_size(1 << 30), "1G");
        assert_eq!(format_byte_size(1000), "1000");
        let with_int = MINIMAL.replace(
            "[[node]]\nnode_id = 49",
            "[datanode_defaults]\ndata_memory = 1048576\n\n[[node]]\nnode_id = 49",
        );
        assert_eq!(
            ClusterConfig::from_toml_str(&with_int)
                .unwrap()
                .data_memory_bytes,
            1 << 20
        );
    }

    fn err_of(text: &str) -> String {
        let e = ClusterConfig::from_toml_str(text).unwrap_err();
        assert_eq!(e.code, ErrorCode::MgmdFailure);
        e.detail
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = err_of(&format!(
            "[datanode_defaults]\ndata_memroy = \"1G\"\n{MINIMAL}"
        ));
        assert!(e.contains("data_memroy"), "{e}");
        let e = err_of(&format!("[sytem]\ncluster_id = 1\n{MINIMAL}"));
        assert!(e.contains("sytem"), "{e}");
        let e = err_of(&format!("{MINIMAL}\nnodeid = 3\n"));
        assert!(e.contains("nodeid"), "{e}");
    }

    #[test]
    fn explicit_node_groups() {
        let four = |groups: [u16; 4]| {
            let mut text = String::from("[datanode_defaults]\nno_of_replicas = 2\n[[node]]\nnode_id = 49\ntype = \"mgmd\"\n");
            for (i, g) in groups.iter().enumerate() {
                text.push_str(&format!(
                    "[[node]]\nnode_id = {}\ntype = \"datanode\"\nnodegroup = {g}\n",
                    i + 1
                ));
            }
            text
        };
        // Nodes 1 and 3 together, 2 and 4 together.
        let c = ClusterConfig::from_toml_str(&four([0, 1, 0, 1])).unwrap();
        assert_eq!(c.node_groups(), vec![vec![1, 3], vec![2, 4]]);
        assert_eq!(ClusterConfig::from_toml_str(&c.to_toml()).unwrap(), c);
        let e = ClusterConfig::from_toml_str(&four([0, 0, 0, 1]))
            .unwrap_err()
            .detail;
        assert!(e.contains("needs no_of_replicas = 2"), "{e}");
        let e = ClusterConfig::from_toml_str(&four([0, 0, 2, 2]))
            .unwrap_err()
            .detail;
        assert!(e.contains("without gaps"), "{e}");
        let partial = four([0, 0, 1, 1]).replacen("nodegroup = 0\n", "", 1);
        let e = ClusterConfig::from_toml_str(&partial).unwrap_err().detail;
        assert!(e.contains("every data node or for none"), "{e}");
    }

    #[test]
    fn validation_rules() {
        let e = err_of(&MINIMAL.replace("node_id = 2", "node_id = 1"));
        assert!(e.contains("node id 1 appears"), "{e}");
        let e = err_of(&MINIMAL.replace("node_id = 2", "node_id = 0"));
        assert!(e.contains("out of range"), "{e}");
        let e = err_of(&MINIMAL.replace("node_id = 2", "node_id = 256"));
        assert!(!e.is_empty());
        let e = err_of(&MINIMAL.replace("type = \"mgmd\"", "type = \"datanode\""));
        assert!(e.contains("exactly one"), "{e}");
        let e = err_of(&format!(
            "{MINIMAL}\n[[node]]\nnode_id = 9\ntype = \"mgmd\"\nport = 1\n"
        ));
        assert!(e.contains("exactly one"), "{e}");
        let e = err_of("[[node]]\nnode_id = 1\ntype = \"mgmd\"\n");
        assert!(e.contains("at least one"), "{e}");
        let e = err_of(&format!(
            "[datanode_defaults]\nmax_frame_bytes = 4096\n{MINIMAL}"
        ));
        assert!(e.contains("largest row"), "{e}");
        let e = err_of(&format!(
            "{MINIMAL}\n[[node]]\nnode_id = 3\ntype = \"datanode\"\n"
        ));
        assert!(e.contains("multiple of no_of_replicas"), "{e}");
        let e = err_of(&format!(
            "[datanode_defaults]\nno_of_replicas = 5\n{MINIMAL}"
        ));
        assert!(e.contains("1..=4"), "{e}");
        let e = err_of(&format!("[datanode_defaults]\nthreads = 0\n{MINIMAL}"));
        assert!(e.contains("threads"), "{e}");
        let e = err_of(&MINIMAL.replace("type = \"datanode\"", "type = \"ndbd\""));
        assert!(e.contains("ndbd"), "{e}");
        let e = err_of(&format!(
            "[datanode_defaults]\ndata_memory = \"1Q\"\n{MINIMAL}"
        ));
        assert!(e.contains("suffix"), "{e}");
        let e = err_of(&format!(
            "[datanode_defaults]\nmax_operations_per_transaction = 40000\n{MINIMAL}"
        ));
        assert!(e.contains("max_concurrent_operations"), "{e}");
        for (line, names) in [
            (
                "heartbeat_interval_ms = 0",
                "heartbeat_interval_ms must be 10..=60000",
            ),
            (
                "heartbeat_interval_ms = 9",
                "heartbeat_interval_ms must be 10..=60000",
            ),
            ("heartbeat_interval_ms = 60001", "heartbeat_interval_ms"),
            (
                "arbitration_timeout_ms = 5",
                "arbitration_timeout_ms must be 10..=300000",
            ),
            ("arbitration_timeout_ms = 300001", "arbitration_timeout_ms"),
            ("start_partial_timeout_ms = 86400001", "use 0 to wait"),
            ("restart_copy_bytes_per_sec = \"1K\"", "use 0 for no limit"),
            (
                "checkpoint_recovery_work_pct = 9",
                "checkpoint_recovery_work_pct (9) is outside 10..=100",
            ),
            (
                "checkpoint_recovery_work_pct = 101",
                "checkpoint_recovery_work_pct (101)",
            ),
        ] {
            let e = err_of(&format!("[datanode_defaults]\n{line}\n{MINIMAL}"));
            assert!(e.contains(names), "{line}: {e}");
        }
        // The edges are allowed; 0 means "no limit" for both.
        for line in [
            "heartbeat_interval_ms = 10",
            "heartbeat_interval_ms = 60000",
            "arbitration_timeout_ms = 300000",
            "start_partial_timeout_ms = 0",
            "start_partial_timeout_ms = 86400000",
            "restart_copy_bytes_per_sec = 0",
            "restart_copy_bytes_per_sec = \"64K\"",
            "checkpoint_recovery_work_pct = 10",
            "checkpoint_recovery_work_pct = 100",
        ] {
            ClusterConfig::from_toml_str(&format!("[datanode_defaults]\n{line}\n{MINIMAL}"))
                .unwrap_or_else(|e| panic!("{line}: {e}"));
        }
    }

    /// A data node config served by an mgmd from before the failure
    /// handling keys still decodes, with the documented defaults.
    #[test]
    fn data_node_config_without_new_keys_gets_defaults() {
        let c = ClusterConfig::from_toml_str(MINIMAL).unwrap();
        let mut json = serde_json::to_value(c.data_node_config(1).unwrap()).unwrap();
        let obj = json.as_object_mut().unwrap();
        for key in [
            "heartbeat_interval_ms",
            "arbitration_timeout_ms",
            "start_partial_timeout_ms",
            "restart_copy_bytes_per_sec",
            "checkpoint_recovery_work_pct",
            "node_groups",
        ] {
            assert!(obj.remove(key).is_some(), "{key} is served");
        }
        let d: DataNodeConfig = serde_json::from_value(json).unwrap();
        assert_eq!(d.heartbeat_interval_ms, defaults::HEARTBEAT_INTERVAL_MS);
        assert_eq!(d.arbitration_timeout_ms, defaults::ARBITRATION_TIMEOUT_MS);
        assert_eq!(
            d.start_partial_timeout_ms,
            defaults::START_PARTIAL_TIMEOUT_MS
        );
        assert_eq!(
            d.restart_copy_bytes_per_sec,
            defaults::RESTART_COPY_BYTES_PER_SEC
        );
        assert_eq!(
            d.checkpoint_recovery_work_pct,
            defaults::CHECKPOINT_RECOVERY_WORK_PCT
        );
        assert!(d.node_groups.is_empty());
    }

    #[test]
    fn local_layout() {
        let c = ClusterConfig::local(4, 2, 1186, Path::new("/tmp/x"));
        c.validate().unwrap();
        assert_eq!(c.mgmd_node().node_id, LOCAL_MGMD_NODE_ID);
        assert_eq!(c.mgmd_addr(), "127.0.0.1:1186");
        assert_eq!(c.data_node_ids(), vec![1, 2, 3, 4]);
        assert_eq!(c.node_groups(), vec![vec![1, 2], vec![3, 4]]);
        assert_eq!(c.mgmd_data_dir(), PathBuf::from("/tmp/x/mgmd-49"));
        assert_eq!(
            c.data_node_config(3).unwrap().data_dir,
            PathBuf::from("/tmp/x/datanode-3")
        );
        let again = ClusterConfig::from_toml_str(&c.to_toml()).unwrap();
        assert_eq!(again, c);
        assert!(ClusterConfig::local(3, 2, 1186, Path::new("/x"))
            .validate()
            .is_err());
        let big = ClusterConfig::local(60, 2, 1186, Path::new("/x"));
        big.validate().unwrap();
        assert_eq!(big.mgmd_node().node_id, 61);
    }
}
