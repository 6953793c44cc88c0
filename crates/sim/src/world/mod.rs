//! The simulated world: 1–6 data nodes (the real kernel blocks), clients
//! with several transactions each, the network between them, virtual time,
//! an arbitrator, and one seeded RNG that decides everything random.
//!
//! - **Network** (`net`): every message is delayed at random; messages of
//!   one connection keep their order (TCP), messages of different
//!   connections are reordered freely; any message may arrive a second
//!   time, a little after the original and outside its connection's order.
//!   A link between two data nodes belongs to one incarnation of each; when
//!   it breaks (a crash, a cut, a close) the messages on it are lost and
//!   each live end hears of it (at once for a crash, later or never for a
//!   cut: only heartbeats tell).
//! - **Faults** (`faults`): data nodes crash at any moment and restart
//!   (fresh, empty, a new incarnation), freeze and thaw (a frozen node
//!   keeps its links; what is sent to it waits), links are cut and healed,
//!   the cluster is split in two with the arbitrator reachable from one
//!   side or neither. A node that shuts itself down is restarted like a
//!   crashed one.
//! - **Clients** (`client`): each keeps a connection to every started data
//!   node, starts each transaction on one of them, and, when that node
//!   fails with a commit in flight, waits for the node taking over to tell
//!   it the outcome.
//! - **Checks** (`outputs`, `checks`): every answer against the model when
//!   it is given; the model commits a transaction when its first replica
//!   commits; an outcome a takeover reports must be the real one; no two
//!   sides of a split both run; after a failure, new transactions commit
//!   within two heartbeat timeouts; at the end (everything healed and
//!   restarted) every replica of every fragment holds the same rows under
//!   the same row ids, exactly what the model says, and no node holds a
//!   transaction, operation, lock wait or commit marker.

mod checks;
mod client;
mod durability;
mod faults;
mod net;
mod options;
mod outputs;
mod scans;
mod unique;

pub use options::{SimFailure, SimOptions, SimReport};

use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::fmt;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use shoal_kernel::signal::{BlockSignal, TxnRef};
use shoal_kernel::{ConnId, DataNode, Faults, KernelConfig};
use shoal_types::arbitration::{formation_lease_ms, Arbitrator, FormationGate};
use shoal_types::distribution::{node_groups, DistributionMap, DistributionSpec};
use shoal_types::{ColumnDef, ColumnType, RowLayout, SchemaVersion, TableDef, TableId, TransId};
use shoal_wire::{Signal, TcKeyReq};

use crate::model::{Image, Model};
use crate::txn::Txn;

/// The load of a run: clients, the transactions each keeps going at
/// once, and the keys they work on.
#[derive(Clone, Copy)]
struct Load {
    clients: usize,
    slots: usize,
    keys: u32,
}

impl Load {
    fn of(opts: &SimOptions) -> Load {
        if opts.wide {
            // A thousand transactions at once over a thousand keys.
            Load {
                clients: 20,
                slots: 50,
                keys: 1024,
            }
        } else {
            // A small key space, so transactions meet on the same rows.
            Load {
                clients: 5,
                slots: 3,
                keys: 32,
            }
        }
    }

    /// Below the transactions that may exist at once, so the limit is met
    /// (on a node coordinating them all) and must give a clean error.
    fn max_concurrent_transactions(&self) -> usize {
        self.clients * self.slots - 1
    }
}

const MAX_DELAY_MS: u64 = 15;
const TICK_MS: u64 = 10;
const DEADLOCK_TIMEOUT_MS: u64 = 200;
const INACTIVE_TIMEOUT_MS: u64 = 1500;
const HEARTBEAT_MS: u64 = 100;
/// Chance that a commit asks for a durable answer (with `durable`).
const P_DURABLE_COMMIT: f64 = 0.3;
/// How often the president switches epochs (with `durable`).
const EPOCH_MS: u64 = 20;
/// A member silent this long is suspected (four missed heartbeats).
const HEARTBEAT_TIMEOUT_MS: u64 = 4 * HEARTBEAT_MS;
const ARBITRATION_TIMEOUT_MS: u64 = 2 * HEARTBEAT_MS;
const MAX_REQUESTS_PER_TXN: u32 = 4;
const MAX_OPS_PER_REQUEST: usize = 4;
/// Chance that a client→node message is lost, breaking its connection.
const P_DISCONNECT: f64 = 0.004;
/// Chance that a message is delivered twice (see `net`).
const P_DUPLICATE: f64 = 0.05;
/// How much later than its original a copy arrives, at most.
const DUPLICATE_LAG_MS: u64 = 3 * MAX_DELAY_MS;
/// Chance that a client leaves an open transaction idle past the
/// inactivity timeout.
const P_LONG_IDLE: f64 = 0.01;
/// Long enough that the node surely aborted the idle transaction: the
/// timeout, plus both message delays, plus tick granularity.
const LONG_IDLE_MS: u64 = INACTIVE_TIMEOUT_MS + 2 * MAX_DELAY_MS + 3 * TICK_MS + 50;
const TABLE: TableId = TableId(1);
/// Fragments of the table per node group.
const FRAGMENTS_PER_GROUP: u32 = 2;
const VERSION: SchemaVersion = SchemaVersion(1);
/// API node id of client 0 (clients are 100, 101, ...).
const FIRST_API_NODE: u16 = 100;

/// Runs one simulation.
pub fn run(opts: &SimOptions) -> Result<SimReport, SimFailure> {
    let mut world = World::new(opts);
    let result = world.run_workload().and_then(|()| world.final_checks());
    match result {
        Ok(()) => Ok(world.report),
        Err(message) => Err(SimFailure {
            opts: opts.clone(),
            virtual_ms: world.now,
            message,
        }),
    }
}

/// The simulated table, distributed over `groups`.
pub fn table_def(groups: Vec<Vec<u16>>, read_backup: bool) -> TableDef {
    table_defs(groups, read_backup, None).0
}

/// The simulated table, and with `unique` (`Some(building)`) its unique
/// index's table.
fn table_defs(
    groups: Vec<Vec<u16>>,
    read_backup: bool,
    unique: Option<bool>,
) -> (TableDef, Option<TableDef>) {
    let def = TableDef::new(
        "sim",
        vec![
            ColumnDef::new("k", ColumnType::Int { unsigned: true }),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
            ColumnDef::new("s", ColumnType::VarChar(16)).nullable(),
        ],
        &["k"],
    )
    .expect("valid table");
    // Ordered indexes: the primary key's, one on a signed column, and one
    // of two columns led by a nullable string (entries move on updates).
    let mut def = def
        .with_index("by_v", &["v"])
        .and_then(|d| d.with_index("by_s_v", &["s", "v"]))
        .expect("valid indexes");
    def.add_primary_index();
    def.id = TABLE;
    def.version = VERSION;
    def.options.read_backup = read_backup;
    def.distribution = Some(DistributionSpec {
        version: 1,
        node_groups: groups,
        fragments_per_group: FRAGMENTS_PER_GROUP,
    });
    let hidden = unique.map(|building| unique::add_unique_index(&mut def, building));
    (def, hidden)
}

/// Something that happens at a point of virtual time.
enum Event {
    /// A client's request reaches a data node. `repeat`: a copy of one
    /// sent before (the client does not expect an answer to it).
    ToNode {
        conn: ConnId,
        req: TcKeyReq,
        repeat: bool,
    },
    /// A client acknowledges committed transactions.
    AckToNode {
        conn: ConnId,
        trans: TransId,
    },
    /// A data node's answer reaches a client connection. `repeat`: a copy,
    /// or the answer to a repeated request (the client must drop it).
    ToClient {
        conn: ConnId,
        trans: TransId,
        request: u32,
        repeat: bool,
    },
    /// A takeover's report reaches a client connection.
    ReportToClient {
        conn: ConnId,
        signal: Signal,
    },
    /// A client's transaction slot acts (starts or continues a
    /// transaction); only the slot's latest wake counts.
    Wake {
        client: usize,
        slot: usize,
        id: u64,
    },
    /// A client opens a connection to a started data node.
    Connect {
        client: usize,
        node: u16,
    },
    /// A client notices its connection is gone.
    ConnLost {
        conn: ConnId,
    },
    /// A signal between the blocks of two data nodes, on link `epoch`.
    NodeMsg {
        from: u16,
        to: u16,
        epoch: u64,
        signal: BlockSignal,
    },
    /// A live node notices its link to `peer` (of `epoch`) broke.
    LinkLost {
        node: u16,
        peer: u16,
        epoch: u64,
    },
    /// The arbitrator's answer reaches a node (of `incarnation`).
    ArbitrationAnswer {
        node: u16,
        incarnation: u32,
        granted: bool,
    },
    /// mgmd adds an ordered index to the table while it has rows
    /// (`--scans`).
    AddIndex,
    /// mgmd restarts: it forgets which initial starts it allowed (its
    /// survival grant is on disk and stays); the data nodes' sessions
    /// come back at once.
    MgmdRestart,
    /// A client begins a scan (`--scans`).
    ScanStart {
        client: usize,
    },
    /// A scan's request reaches a data node.
    ScanToNode {
        conn: ConnId,
        signal: Signal,
    },
    /// A scan's answer reaches a client connection.
    ScanToClient {
        conn: ConnId,
        signal: Signal,
    },
    /// The next step of the fault plan.
    Fault,
    /// A second crash soon after the first (a cascade: it lands while the
    /// survivors still handle the first), if `node` may still go.
    CrashAlso {
        node: u16,
    },
    /// A stopped data node's supervisor starts it again.
    Restart {
        node: u16,
    },
    /// A node's sync of its redo log or a checkpoint finished.
    DiskSynced {
        node: u16,
        incarnation: u32,
        what: durability::DiskSync,
    },
    Tick,
}

struct Scheduled {
    at: u64,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Reversed: `BinaryHeap` pops the earliest event (ties: first scheduled).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// A one-way message stream whose order is kept.
#[derive(Clone, Copy, Hash, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    ToNode(ConnId),
    ToClient(ConnId),
    Nodes { from: u16, to: u16 },
}

/// One data node slot: running, frozen, or down.
enum NodeState {
    Running(Box<DataNode>),
    /// Frozen (SIGSTOP): keeps its links; what reaches it waits here.
    Frozen {
        node: Box<DataNode>,
        held: Vec<Event>,
    },
    Down,
}

struct SimNode {
    incarnation: u32,
    state: NodeState,
}

/// A client connection to a data node.
#[derive(Clone, Copy, Debug)]
struct ConnInfo {
    client: usize,
    node: u16,
    incarnation: u32,
    /// The client still uses it (it has not noticed it broke).
    open: bool,
}

struct Client {
    api_node: u16,
    /// The client's connection to each data node it reaches.
    conns: BTreeMap<u16, ConnId>,
    slots: Vec<Option<Txn>>,
    /// Takeover reports by (coordinator, incarnation): the transactions
    /// reported committed, and whether the rest are known aborted.
    reports: BTreeMap<(u16, u32), (BTreeSet<TransId>, bool)>,
    /// Nodes a connection is being opened to.
    connecting: BTreeSet<u16>,
    /// Per slot, the id of its latest wake (earlier ones are stale).
    wake_ids: Vec<u64>,
}

/// A transaction the model is waiting to see committed by a replica.
struct Decided {
    client: usize,
    trans: TransId,
    writes: Vec<(u32, Image)>,
    /// The commits it saw or overwrote (its commit depends on them).
    locked: Vec<u64>,
}

/// One start of a data node: (node id, incarnation).
type Start = (u16, u32);

struct World {
    opts: SimOptions,
    load: Load,
    rng: SmallRng,
    now: u64,
    events: BinaryHeap<Scheduled>,
    next_event_seq: u64,
    /// Delivery time of the last message per lane: later messages of a
    /// lane are never delivered earlier (TCP keeps order per connection).
    lane_clock: HashMap<Lane, u64>,
    /// Data node `i + 1` is `nodes[i]`.
    nodes: Vec<SimNode>,
    groups: Vec<Vec<u16>>,
    /// Links between data nodes, by (lower id, higher id).
    links: BTreeMap<(u16, u16), net::Link>,
    next_link_epoch: u64,
    /// Pairs of data nodes that cannot reach each other now.
    cut: BTreeSet<(u16, u16)>,
    /// Nodes that can reach the arbitrator (`None`: all).
    arbitrator_reach: Option<BTreeSet<u16>>,
    arbitrator: Arbitrator,
    /// The arbitrator's partial initial starts (mgmd's rule: one group at
    /// a time, none right after it started).
    formation: FormationGate,
    faults: faults::Plan,
    map: DistributionMap,
    conns: HashMap<ConnId, ConnInfo>,
    /// A request the checker itself sends, and its answer once it came.
    direct: Option<(ConnId, Option<Signal>)>,
    /// Commits whose first replica committed and whose replicas have not
    /// all confirmed yet, with their model commit number: a reader may
    /// still see the data from before them.
    in_progress: BTreeMap<TxnRef, u64>,
    /// The scans clients run (`--scans`), by connection and id.
    scans: BTreeMap<(ConnId, TransId), scans::SimScan>,
    /// Commits TC decided, waiting for a replica to commit.
    decided: HashMap<TxnRef, Decided>,
    /// Transactions the model committed, by client and id, and by handle.
    model_committed: BTreeSet<(usize, TransId)>,
    applied: std::collections::HashSet<TxnRef>,
    /// Commits not confirmed by every replica yet: the replicas (node,
    /// incarnation) that committed them. Cleared at `CommitDone`.
    commit_holders: HashMap<TxnRef, Vec<(u16, u32)>>,
    /// The client of each transaction the model committed.
    txn_client: HashMap<TxnRef, (usize, TransId)>,
    /// Committed transactions that wrote nothing.
    empty_commits: BTreeSet<(usize, TransId)>,
    /// Some node is a member of a running cluster (false before the first
    /// one forms, and after every node stopped).
    cluster_up: bool,
    /// Data memory a node uses with the table created and empty.
    empty_memory_bytes: u64,
    /// Transactions known not to commit (their client was told so).
    must_not_commit: BTreeSet<(usize, TransId)>,
    def: TableDef,
    /// With `--unique`: the hidden table of the table's unique index.
    unique_def: Option<TableDef>,
    layout: RowLayout,
    model: Model,
    clients: Vec<Client>,
    /// Transactions whose client lost the connection to a live node with a
    /// request the node had taken: the node may still commit them.
    orphans: HashMap<(usize, TransId), Txn>,
    next_conn: ConnId,
    started: u64,
    /// After a failure: (when, the first transaction id begun after it).
    progress: Option<(u64, u64)>,
    next_trans_serial: u64,
    /// Client transaction ids (one counter for all: unique per API node).
    next_trans_id: u64,
    report: SimReport,
    /// `SHOAL_SIM_TRACE=1`: print every request and answer (to debug a seed).
    trace: bool,
    /// Rows per copy batch of a node restart: small in most seeds, so a
    /// copy takes many batches and writes meet it half done.
    copy_batch_rows: usize,
    /// The views each start of a node committed, as seen after each of its
    /// steps: (number, members) of the latest, by (node, incarnation).
    seen_views: BTreeMap<Start, (u64, Vec<Start>)>,
    /// (dropper, dropped): a start that committed a view leaving out a
    /// start its previous view held.
    dropped_by: BTreeSet<(Start, Start)>,
    /// The lowest view number that left a start out.
    dropped_at: BTreeMap<Start, u64>,
    /// Each data node's disk (with `durable`), by node id - 1.
    files: Vec<durability::NodeFiles>,
    /// The final checks passed and the table is being emptied outside the
    /// model.
    model_final: bool,
    /// Nodes whose snapshot after a copy is whole, and its epoch: checked
    /// once that epoch is durable.
    snapshot_audits: BTreeMap<u16, (u32, u64)>,
    /// The newest epoch any node recorded as durable.
    max_durable: u64,
    /// The epoch the cluster last restarted from, and whether the whole
    /// cluster is down and the next restore sets it.
    restart_epoch: Option<u64>,
    awaiting_restore: bool,
    /// When the durable epoch last moved, and since when every node has
    /// run started with no fault (the durable epoch must move then).
    durable_moved_ms: u64,
    stable_since: Option<u64>,
    /// The epoch of each transaction the model committed with writes.
    commit_epochs: HashMap<(usize, TransId), u64>,
    /// While the outputs of a repeated request are handled: its
    /// connection, transaction and request number.
    answering_repeat: Option<(ConnId, TransId, u32)>,
}

impl World {
    fn new(opts: &SimOptions) -> World {
        let load = Load::of(opts);
        let ids: Vec<u16> = (1..=opts.data_nodes).collect();
        let groups = node_groups(&ids, opts.replicas as usize).expect("a valid cluster shape");
        // Odd seeds keep the unique index building all run (its guarded
        // deletes and the inserts that wait behind them).
        let unique = opts.unique.then_some(opts.seed % 2 == 1);
        let (def, unique_def) = table_defs(groups.clone(), opts.read_backup, unique);
        let map = def
            .distribution
            .as_ref()
            .expect("set")
            .map()
            .expect("valid");
        let mut world = World {
            opts: opts.clone(),
            load,
            rng: SmallRng::seed_from_u64(opts.seed),
            now: 1_000,
            events: BinaryHeap::new(),
            next_event_seq: 0,
            lane_clock: HashMap::new(),
            nodes: Vec::new(),
            groups,
            links: BTreeMap::new(),
            next_link_epoch: 1,
            cut: BTreeSet::new(),
            arbitrator_reach: None,
            arbitrator: Arbitrator::default(),
            formation: FormationGate::new(
                0,
                formation_lease_ms(HEARTBEAT_MS, ARBITRATION_TIMEOUT_MS),
            ),
            faults: faults::Plan::default(),
            map,
            conns: HashMap::new(),
            direct: None,
            in_progress: BTreeMap::new(),
            scans: BTreeMap::new(),
            decided: HashMap::new(),
            model_committed: BTreeSet::new(),
            applied: std::collections::HashSet::new(),
            commit_holders: HashMap::new(),
            txn_client: HashMap::new(),
            empty_commits: BTreeSet::new(),
            cluster_up: false,
            empty_memory_bytes: 0,
            must_not_commit: BTreeSet::new(),
            layout: RowLayout::new(&def),
            def,
            unique_def,
            model: Model::new(load.keys),
            clients: Vec::new(),
            orphans: HashMap::new(),
            next_conn: 1,
            started: 0,
            progress: None,
            next_trans_serial: 1,
            next_trans_id: 1,
            report: SimReport {
                seed: opts.seed,
                data_nodes: opts.data_nodes,
                replicas: opts.replicas,
                read_backup: opts.read_backup,
                wide: opts.wide,
                failures: opts.failures,
                transactions: opts.transactions,
                ..SimReport::default()
            },
            trace: std::env::var_os("SHOAL_SIM_TRACE").is_some_and(|v| v == "1"),
            // From the seed, not the RNG (whose stream stays as it was).
            copy_batch_rows: [2, 8, 32, 512][(opts.seed >> 2) as usize % 4],
            seen_views: BTreeMap::new(),
            dropped_by: BTreeSet::new(),
            dropped_at: BTreeMap::new(),
            files: (0..opts.data_nodes).map(|_| Default::default()).collect(),
            model_final: false,
            snapshot_audits: BTreeMap::new(),
            max_durable: 0,
            restart_epoch: None,
            awaiting_restore: opts.durable,
            durable_moved_ms: 0,
            stable_since: None,
            commit_epochs: HashMap::new(),
            answering_repeat: None,
        };
        for id in 1..=opts.data_nodes {
            world.nodes.push(SimNode {
                incarnation: 0,
                state: NodeState::Down,
            });
            world
                .start_node(id)
                .expect("a node with empty files starts");
        }
        world.empty_memory_bytes = world
            .node_ref(1)
            .map_or(0, |n| n.stats().data_memory_used_bytes);
        for client in 0..load.clients {
            world.clients.push(Client {
                api_node: FIRST_API_NODE + client as u16,
                conns: BTreeMap::new(),
                slots: (0..load.slots).map(|_| None).collect(),
                reports: BTreeMap::new(),
                connecting: BTreeSet::new(),
                wake_ids: vec![0; load.slots],
            });
        }
        world.connect_links();
        let at = world.now + TICK_MS;
        world.schedule(at, Event::Tick);
        if opts.failures {
            world.faults = faults::Plan::new(&mut world.rng, opts);
            let at = world.now + world.faults.first_delay_ms();
            world.schedule(at, Event::Fault);
        }
        world
    }

    /// The kernel configuration of data node `id` in `incarnation`.
    fn kernel_config(&self, id: u16, incarnation: u32) -> KernelConfig {
        KernelConfig {
            node_id: id,
            incarnation,
            data_nodes: (1..=self.opts.data_nodes).collect(),
            node_groups: self.groups.clone(),
            data_memory_bytes: 64 << 20,
            max_concurrent_transactions: self.load.max_concurrent_transactions(),
            max_concurrent_operations: 100_000,
            // The final checks read every key in one request.
            max_operations_per_transaction: 1000.max(self.load.keys as usize),
            deadlock_timeout_ms: DEADLOCK_TIMEOUT_MS,
            transaction_inactive_timeout_ms: INACTIVE_TIMEOUT_MS,
            heartbeat_interval_ms: HEARTBEAT_MS,
            arbitration_timeout_ms: ARBITRATION_TIMEOUT_MS,
            start_partial_timeout_ms: 2_000,
            // Slow enough that writes meet a copy in progress.
            copy_bytes_per_sec: 200_000,
            max_answer_bytes: 1 << 20,
            copy_batch_rows: self.copy_batch_rows,
            // A few rows a tick: changes land among the snapshot's rows.
            snapshot_step_bytes: 256,
            // Below the clients' scans at once: some meet the bound (488).
            max_concurrent_scans: self.load.clients.saturating_sub(1).max(2),
            // A row or two a tick: writes meet an index build half done.
            index_build_rows_per_tick: 1 + (self.opts.seed >> 6) as usize % 2,
            // From the seed: batches that look at one row, a few, or all.
            scan_examine_rows_max: [1, 3, 16, 16_384][(self.opts.seed >> 4) as usize % 4],
            // Different per node and start, the same on every run of the seed.
            hash_seed: self.opts.seed ^ (u64::from(id) << 48) ^ (u64::from(incarnation) << 32),
            epoch_interval_ms: if self.opts.durable { EPOCH_MS } else { 0 },
            // Small, so logs are written in many pieces between syncs.
            redo_write_bytes: 8 << 10,
            // A checkpoint every 32 KiB of log (about eight epochs' saves),
            // scanning slowly enough that rows change under it.
            redo_log_bytes: 256 << 10,
            lcp_bytes_per_sec: 20_000,
            // From the seed: chains of partial checkpoints short or long.
            lcp_recovery_work_pct: [50, 10, 100][(self.opts.seed >> 3) as usize % 3],
            report_commit_points: true,
            faults: self.opts.faults.clone(),
        }
    }

    /// Starts data node `id` (again): a fresh process, a new incarnation,
    /// its schema from "mgmd".
    fn start_node(&mut self, id: u16) -> Result<(), String> {
        // As mgmd: one sequence of start numbers for all data nodes.
        let incarnation = self.nodes.iter().map(|n| n.incarnation).max().unwrap_or(0) + 1;
        self.nodes[id as usize - 1].incarnation = incarnation;
        let cfg = self.kernel_config(id, incarnation);
        let mut node = DataNode::new(cfg, self.now);
        self.create_tables(&mut node);
        if self.trace {
            eprintln!("{:>8} ms node {id} starts (start {incarnation})", self.now);
        }
        if self.durable() {
            self.restore_files(id, &mut node)?;
        }
        self.nodes[id as usize - 1].state = NodeState::Running(Box::new(node));
        Ok(())
    }

    /// The schema, as mgmd gives it to a starting node (all of it before
    /// the node serves, so the order does not matter).
    fn create_tables(&self, node: &mut DataNode) {
        if let Some(hidden) = &self.unique_def {
            node.create_table(hidden);
        }
        node.create_table(&self.def);
    }

    /// The running data node `id`, if it runs (not down, not frozen).
    fn running(&mut self, id: u16) -> Option<&mut DataNode> {
        match &mut self.nodes.get_mut(id as usize - 1)?.state {
            NodeState::Running(n) => Some(n),
            _ => None,
        }
    }

    /// Data node `id` if it exists (running or frozen), to change.
    fn node_mut(&mut self, id: u16) -> Option<&mut DataNode> {
        match &mut self.nodes.get_mut(id as usize - 1)?.state {
            NodeState::Running(n) | NodeState::Frozen { node: n, .. } => Some(n),
            NodeState::Down => None,
        }
    }

    /// Data node `id` if it exists (running or frozen).
    fn node_ref(&self, id: u16) -> Option<&DataNode> {
        match &self.nodes.get(id as usize - 1)?.state {
            NodeState::Running(n) | NodeState::Frozen { node: n, .. } => Some(n),
            NodeState::Down => None,
        }
    }

    /// Wakes a client's slot at `at`, replacing any wake planned before.
    fn schedule_wake(&mut self, client: usize, slot: usize, at: u64) {
        self.clients[client].wake_ids[slot] += 1;
        let id = self.clients[client].wake_ids[slot];
        self.schedule(at, Event::Wake { client, slot, id });
    }

    fn schedule(&mut self, at: u64, event: Event) {
        self.events.push(Scheduled {
            at,
            seq: self.next_event_seq,
            event,
        });
        self.next_event_seq += 1;
    }

    fn done(&self) -> bool {
        self.started >= self.opts.transactions
            && self
                .clients
                .iter()
                .all(|c| c.slots.iter().all(Option::is_none))
    }

    fn run_workload(&mut self) -> Result<(), String> {
        // Generous: a transaction takes well under 100 ms of virtual time
        // even with lock waits and restarts; a stuck request shows up as
        // this limit.
        let time_limit = self.now + 600_000 + self.opts.transactions * 200;
        for client in 0..self.clients.len() {
            for slot in 0..self.load.slots {
                let at = self.now + net::random_delay(&mut self.rng, 50);
                self.schedule_wake(client, slot, at);
            }
        }
        self.start_scans();
        while !self.done() {
            let Some(next) = self.events.pop() else {
                return Err("no events left but transactions are unfinished".into());
            };
            self.now = next.at;
            if self.now > time_limit {
                return Err(format!(
                    "not finished after {} ms of virtual time; requests still unanswered: {}; LQH records: {}",
                    self.now,
                    self.unanswered().join("; "),
                    self.lqh_records()
                ));
            }
            self.event(next.event)?;
            self.check_progress()?;
        }
        self.report.virtual_ms = self.now;
        Ok(())
    }

    /// Handles one event.
    fn event(&mut self, event: Event) -> Result<(), String> {
        let Some(event) = self.hold_for_frozen(event) else {
            return Ok(());
        };
        match event {
            Event::Wake { client, slot, id } => {
                if self.clients[client].wake_ids[slot] == id {
                    self.wake(client, slot)
                } else {
                    Ok(())
                }
            }
            Event::ToNode { conn, req, repeat } => self.deliver_to_node(conn, req, repeat),
            Event::AckToNode { conn, trans } => self.deliver_ack(conn, trans),
            Event::ToClient {
                conn,
                trans,
                request,
                repeat,
            } => self.deliver_to_client(conn, trans, request, repeat),
            Event::ReportToClient { conn, signal } => self.deliver_report(conn, signal),
            Event::ScanStart { client } => self.scan_start(client),
            Event::AddIndex => self.add_index(),
            Event::MgmdRestart => {
                self.report.mgmd_restarts += 1;
                self.formation = FormationGate::new(
                    self.now,
                    formation_lease_ms(HEARTBEAT_MS, ARBITRATION_TIMEOUT_MS),
                );
                Ok(())
            }
            Event::ScanToNode { conn, signal } => self.scan_to_node(conn, signal),
            Event::ScanToClient { conn, signal } => self.scan_to_client(conn, signal),
            Event::Connect { client, node } => self.connect(client, node),
            Event::ConnLost { conn } => self.conn_lost(conn),
            Event::NodeMsg {
                from,
                to,
                epoch,
                signal,
            } => self.node_msg(from, to, epoch, signal),
            Event::LinkLost { node, peer, epoch } => self.link_lost_event(node, peer, epoch),
            Event::ArbitrationAnswer {
                node,
                incarnation,
                granted,
            } => self.arbitration_answer(node, incarnation, granted),
            Event::Fault => self.fault_step(),
            Event::CrashAlso { node } => {
                self.crash_also(node);
                Ok(())
            }
            Event::Restart { node } => self.restart(node),
            Event::DiskSynced {
                node,
                incarnation,
                what,
            } => self.disk_synced(node, incarnation, what),
            Event::Tick => self.tick(),
        }
    }

    /// Events for a frozen node wait until it thaws: `None` when held.
    fn hold_for_frozen(&mut self, event: Event) -> Option<Event> {
        let node = match &event {
            Event::ToNode { conn, .. }
            | Event::AckToNode { conn, .. }
            | Event::ScanToNode { conn, .. } => self.conns.get(conn).map(|c| c.node),
            Event::NodeMsg { to, .. } => Some(*to),
            Event::LinkLost { node, .. }
            | Event::ArbitrationAnswer { node, .. }
            | Event::DiskSynced { node, .. } => Some(*node),
            _ => None,
        };
        let Some(node) = node else {
            return Some(event);
        };
        match &mut self.nodes[node as usize - 1].state {
            NodeState::Frozen { held, .. } => {
                held.push(event);
                None
            }
            _ => Some(event),
        }
    }

    fn tick(&mut self) -> Result<(), String> {
        if self.trace && self.durable() && self.now % 500 < TICK_MS {
            for id in 1..=self.opts.data_nodes {
                if let Some(n) = self.node_ref(id) {
                    eprintln!(
                        "{:>8} ms node {id} epochs: {:?} watermarks {:?} durable {} committing {}",
                        self.now,
                        n.epoch_now(),
                        n.epoch_watermarks(),
                        n.durable_epoch(),
                        n.committing_transactions()
                    );
                    eprintln!("            {}", n.describe_epochs());
                    for line in n.describe_committing() {
                        eprintln!("            {line}");
                    }
                }
            }
        }
        for id in 1..=self.opts.data_nodes {
            let now = self.now;
            let Some(node) = self.running(id) else {
                continue;
            };
            let mut out = Vec::new();
            node.tick(now, &mut out);
            self.handle_outputs(id, out)?;
        }
        self.connect_links();
        self.connect_clients();
        self.check_split_brain()?;
        self.check_durable_progress()?;
        let at = self.now + TICK_MS;
        self.schedule(at, Event::Tick);
        Ok(())
    }

    fn unanswered(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (i, c) in self.clients.iter().enumerate() {
            for t in c.slots.iter().flatten() {
                if let Some(req) = &t.in_flight {
                    v.push(format!("client {i} trans {}: {req:?}", t.trans.0));
                }
            }
        }
        v
    }

    /// FNV-1a over a few numbers.
    fn digest(&mut self, words: &[u64]) {
        let mut h = if self.report.digest == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.report.digest
        };
        for w in words {
            for b in w.to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        self.report.digest = h;
    }
}
