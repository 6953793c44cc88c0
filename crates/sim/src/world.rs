//! The simulated world: 1–4 data nodes (the real kernel blocks), a few
//! clients with several transactions each, a network between them, virtual
//! time and one seeded RNG that decides everything random.
//!
//! The network delays every message by a random time; messages of one
//! connection keep their order (TCP), messages of different connections
//! are reordered freely. Any message may also arrive a second time, a
//! little after the original and outside its connection's order; the
//! receiver must drop or harmlessly repeat it (an answer to a repeated
//! client request must be a refusal, and the client drops answers to
//! requests it does not wait for). A lost message is a broken connection: the node
//! hears `client_disconnected`, the client loses every transaction it had
//! and reconnects. Every answer is checked against the model when the node
//! emits it (`Txn::check_conf` / `Txn::check_ref`); at the end the node's
//! contents are read back and compared with the model, and the node must
//! hold no transaction, operation record or memory it should not.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fmt;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shoal_kernel::signal::BlockSignal;
use shoal_kernel::{ConnId, DataNode, KernelConfig, Output};
use shoal_types::distribution::{node_groups, DistributionMap, DistributionSpec};
use shoal_types::layout::encode_attrs;
use shoal_types::{
    AttrSlice, ColumnDef, ColumnType, ErrorCode, RowLayout, SchemaVersion, TableDef, TableId,
    TransId, Value,
};
use shoal_wire::{
    ExecType, KeyOp, LockMode, OpResult, OpType, Signal, TcKeyConf, TcKeyReq, TransState,
    ALL_COLUMNS, OP_IGNORE_ERROR,
};

use crate::model::{Model, Row};
use crate::txn::{decode_read, OpKind, Outcome, PlannedOp, Request, Txn, K_COL, S_COL, V_COL};

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
const MAX_REQUESTS_PER_TXN: u32 = 4;
const MAX_OPS_PER_REQUEST: usize = 4;
/// Chance that a client→node message is lost, breaking its connection.
const P_DISCONNECT: f64 = 0.004;
/// Chance that a message (client request, answer, or any signal between
/// data nodes) is delivered twice, the copy at a random time after the
/// original (possibly after later messages of its connection): a repeat
/// must change nothing — commit-phase signals are idempotent, operations
/// and requests carry numbers the receiver has seen.
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

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub seed: u64,
    /// Transactions to start in total.
    pub transactions: u64,
    /// Data nodes (ids 1..=n), a multiple of `replicas`.
    pub data_nodes: u16,
    /// Replicas of each fragment (node group size).
    pub replicas: u16,
    /// The table reads from backups (committed reads at any replica).
    pub read_backup: bool,
    /// A thousand transactions at once over 1024 keys, instead of 15 over
    /// 32 keys.
    pub wide: bool,
}

impl SimOptions {
    /// One data node.
    pub fn new(seed: u64, transactions: u64) -> SimOptions {
        SimOptions {
            seed,
            transactions,
            data_nodes: 1,
            replicas: 1,
            read_backup: false,
            wide: false,
        }
    }

    /// The cluster shape seed `seed` gets when none is asked for: 1 to 4
    /// data nodes with 1 or 2 replicas, read from backup or not, narrow or
    /// wide load, so a run of 24 consecutive seeds covers every mix.
    pub fn shape_for_seed(seed: u64, transactions: u64) -> SimOptions {
        const SHAPES: [(u16, u16); 6] = [(1, 1), (2, 1), (2, 2), (3, 1), (4, 2), (4, 1)];
        let (data_nodes, replicas) = SHAPES[(seed % SHAPES.len() as u64) as usize];
        SimOptions {
            seed,
            transactions,
            data_nodes,
            replicas,
            read_backup: (seed / SHAPES.len() as u64) % 2 == 1,
            wide: (seed / (2 * SHAPES.len() as u64)) % 2 == 1,
        }
    }
}

/// What happened in a run (equal for equal options: runs are deterministic).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimReport {
    pub seed: u64,
    pub data_nodes: u16,
    pub replicas: u16,
    pub read_backup: bool,
    pub wide: bool,
    pub transactions: u64,
    pub committed: u64,
    pub rolled_back: u64,
    /// Transactions the node refused and aborted, by error code.
    pub failed: BTreeMap<u16, u64>,
    /// Transactions whose client lost its connection before hearing the end.
    pub abandoned: u64,
    pub disconnects: u64,
    /// Messages delivered twice.
    pub duplicates: u64,
    /// Answers to repeated client requests (all refusals).
    pub repeats_refused: u64,
    pub requests: u64,
    pub operations: u64,
    pub virtual_ms: u64,
    /// Rows in the table at the end (before the final cleanup).
    pub final_rows: u64,
    /// A hash of every answer the node gave, with its time.
    pub digest: u64,
}

impl fmt::Display for SimReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failed: Vec<String> = self
            .failed
            .iter()
            .map(|(c, n)| format!("{c}×{n}"))
            .collect();
        write!(
            f,
            "seed {} ({} nodes, {} replicas{}{}): {} txns ({} committed, {} rolled back, failed [{}], {} abandoned), {} disconnects, {} duplicates ({} repeated requests refused), {} requests, {} ops, {:.1} s virtual, {} rows at end",
            self.seed,
            self.data_nodes,
            self.replicas,
            if self.read_backup { ", read backup" } else { "" },
            if self.wide { ", wide" } else { "" },
            self.transactions,
            self.committed,
            self.rolled_back,
            failed.join(" "),
            self.abandoned,
            self.disconnects,
            self.duplicates,
            self.repeats_refused,
            self.requests,
            self.operations,
            self.virtual_ms as f64 / 1000.0,
            self.final_rows
        )
    }
}

/// A check failed. The message says what; the seed replays it.
#[derive(Debug)]
pub struct SimFailure {
    pub seed: u64,
    pub transactions: u64,
    pub data_nodes: u16,
    pub replicas: u16,
    pub read_backup: bool,
    pub wide: bool,
    pub virtual_ms: u64,
    pub message: String,
}

impl SimFailure {
    /// The command that replays this run.
    pub fn replay_command(&self) -> String {
        format!(
            "cargo run --release -p shoal-sim -- --seed {} --txns {} --nodes {} --replicas {}{}{}",
            self.seed,
            self.transactions,
            self.data_nodes,
            self.replicas,
            if self.read_backup {
                " --read-backup"
            } else {
                ""
            },
            if self.wide { " --wide" } else { "" }
        )
    }
}

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "simulation failed (seed {}) at {} ms virtual time: {}\nreplay with: {}",
            self.seed,
            self.virtual_ms,
            self.message,
            self.replay_command()
        )
    }
}

impl std::error::Error for SimFailure {}

/// Runs one simulation.
pub fn run(opts: &SimOptions) -> Result<SimReport, SimFailure> {
    let mut world = World::new(opts);
    let result = world.run_workload().and_then(|()| world.final_checks());
    match result {
        Ok(()) => Ok(world.report),
        Err(message) => Err(SimFailure {
            seed: opts.seed,
            transactions: opts.transactions,
            data_nodes: opts.data_nodes,
            replicas: opts.replicas,
            read_backup: opts.read_backup,
            wide: opts.wide,
            virtual_ms: world.now,
            message,
        }),
    }
}

/// The simulated table, distributed over `groups`.
pub fn table_def(groups: Vec<Vec<u16>>, read_backup: bool) -> TableDef {
    let mut def = TableDef::new(
        "sim",
        vec![
            ColumnDef::new("k", ColumnType::Int { unsigned: true }),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
            ColumnDef::new("s", ColumnType::VarChar(16)).nullable(),
        ],
        &["k"],
    )
    .expect("valid table");
    def.id = TABLE;
    def.version = VERSION;
    def.options.read_backup = read_backup;
    def.distribution = Some(DistributionSpec {
        version: 1,
        node_groups: groups,
        fragments_per_group: FRAGMENTS_PER_GROUP,
    });
    def
}

enum Event {
    /// A client's request reaches the node. `repeat`: a copy of one sent
    /// before (the client does not expect an answer to it).
    ToNode {
        conn: ConnId,
        req: TcKeyReq,
        repeat: bool,
    },
    /// The node's answer to request `request` of `trans` reaches the
    /// client. `repeat`: a copy, or the answer to a repeated request (the
    /// client must drop it).
    ToClient {
        conn: ConnId,
        trans: TransId,
        request: u32,
        repeat: bool,
    },
    /// A client's transaction slot acts (starts or continues a transaction).
    Wake {
        client: usize,
        slot: usize,
        conn: ConnId,
    },
    /// A signal between the blocks of two data nodes.
    NodeMsg {
        signal: BlockSignal,
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
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Reversed: `BinaryHeap` pops the earliest event (ties: first scheduled).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// What a data node said about a client's transaction.
#[derive(Debug)]
enum Answer {
    Signal(Signal),
    /// TC decided to commit (`Output::CommitPoint`): the request's results.
    CommitPoint(TransId, Vec<OpResult>),
}

/// A one-way message stream whose order is kept.
#[derive(Clone, Copy, Hash, PartialEq, Eq)]
enum Lane {
    ToNode(ConnId),
    ToClient(ConnId),
    Nodes { from: u16, to: u16 },
}

struct Client {
    conn: ConnId,
    slots: Vec<Option<Txn>>,
}

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
    nodes: Vec<DataNode>,
    map: DistributionMap,
    /// The data node each client connection is to.
    conn_node: HashMap<ConnId, u16>,
    /// A request the checker itself sends, and its answer once it came.
    direct: Option<(ConnId, Option<Signal>)>,
    /// Commits past their commit point whose replicas have not all
    /// confirmed yet, with their model commit number: a reader may still
    /// see the data from before them.
    in_progress: BTreeMap<(ConnId, TransId), u64>,
    def: TableDef,
    layout: RowLayout,
    model: Model,
    clients: Vec<Client>,
    /// Current connection → client.
    conn_owner: HashMap<ConnId, usize>,
    /// Transactions whose client disconnected with a request the node had
    /// taken: the node may still commit them.
    orphans: HashMap<(ConnId, TransId), Txn>,
    next_conn: ConnId,
    next_trans: u64,
    started: u64,
    empty_memory_bytes: Vec<u64>,
    report: SimReport,
    /// `SHOAL_SIM_TRACE=1`: print every request and answer (to debug a seed).
    trace: bool,
}

impl World {
    fn new(opts: &SimOptions) -> World {
        let load = Load::of(opts);
        let ids: Vec<u16> = (1..=opts.data_nodes).collect();
        let groups = node_groups(&ids, opts.replicas as usize).expect("a valid cluster shape");
        let def = table_def(groups, opts.read_backup);
        let map = def
            .distribution
            .as_ref()
            .expect("set")
            .map()
            .expect("valid");
        let nodes: Vec<DataNode> = ids
            .iter()
            .map(|&node_id| {
                let mut node = DataNode::new(KernelConfig {
                    node_id,
                    data_memory_bytes: 64 << 20,
                    max_concurrent_transactions: load.max_concurrent_transactions(),
                    max_concurrent_operations: 100_000,
                    // The final checks read every key in one request.
                    max_operations_per_transaction: 1000.max(load.keys as usize),
                    deadlock_timeout_ms: DEADLOCK_TIMEOUT_MS,
                    transaction_inactive_timeout_ms: INACTIVE_TIMEOUT_MS,
                    report_commit_points: true,
                });
                node.create_table(&def);
                node
            })
            .collect();
        let empty_memory_bytes = nodes
            .iter()
            .map(|n| n.stats().data_memory_used_bytes)
            .collect();
        let mut world = World {
            opts: opts.clone(),
            load,
            rng: SmallRng::seed_from_u64(opts.seed),
            now: 1_000,
            events: BinaryHeap::new(),
            next_event_seq: 0,
            lane_clock: HashMap::new(),
            nodes,
            map,
            conn_node: HashMap::new(),
            direct: None,
            in_progress: BTreeMap::new(),
            layout: RowLayout::new(&def),
            def,
            model: Model::new(load.keys),
            clients: Vec::new(),
            conn_owner: HashMap::new(),
            orphans: HashMap::new(),
            next_conn: 1,
            next_trans: 1,
            started: 0,
            empty_memory_bytes,
            report: SimReport {
                seed: opts.seed,
                data_nodes: opts.data_nodes,
                replicas: opts.replicas,
                read_backup: opts.read_backup,
                wide: opts.wide,
                transactions: opts.transactions,
                ..SimReport::default()
            },
            trace: std::env::var_os("SHOAL_SIM_TRACE").is_some_and(|v| v == "1"),
        };
        for client in 0..load.clients {
            let conn = world.new_conn(client);
            world.clients.push(Client {
                conn,
                slots: (0..load.slots).map(|_| None).collect(),
            });
            for slot in 0..load.slots {
                let at = world.now + world.rng.random_range(0..50);
                world.schedule(at, Event::Wake { client, slot, conn });
            }
        }
        let at = world.now + TICK_MS;
        world.schedule(at, Event::Tick);
        world
    }

    /// A new connection of `client`, to a data node picked at random (any
    /// node coordinates any transaction).
    fn new_conn(&mut self, client: usize) -> ConnId {
        let conn = self.next_conn;
        self.next_conn += 1;
        self.conn_owner.insert(conn, client);
        let node = self.rng.random_range(1..=self.opts.data_nodes);
        self.conn_node.insert(conn, node);
        conn
    }

    fn node(&mut self, id: u16) -> &mut DataNode {
        &mut self.nodes[id as usize - 1]
    }

    fn schedule(&mut self, at: u64, event: Event) {
        self.events.push(Scheduled {
            at,
            seq: self.next_event_seq,
            event,
        });
        self.next_event_seq += 1;
    }

    /// Schedules a message on its lane: a random delay, but never before
    /// the lane's previous message. Returns its delivery time.
    fn send(&mut self, lane: Lane, event: Event) -> u64 {
        let earliest = self.now + self.rng.random_range(0..=MAX_DELAY_MS);
        let lane = self.lane_clock.entry(lane).or_insert(0);
        let at = earliest.max(*lane);
        *lane = at;
        self.schedule(at, event);
        at
    }

    /// Sometimes delivers `copy` too, a little after its original (due at
    /// `original_at`), outside its lane's order.
    fn maybe_repeat(&mut self, original_at: u64, copy: impl FnOnce() -> Event) {
        if self.rng.random_bool(P_DUPLICATE) {
            self.report.duplicates += 1;
            let at = original_at + self.rng.random_range(0..=DUPLICATE_LAG_MS);
            self.schedule(at, copy());
        }
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
        // even with lock waits; a stuck request shows up as this limit.
        let time_limit = self.now + 600_000 + self.opts.transactions * 200;
        while !self.done() {
            let Some(next) = self.events.pop() else {
                return Err("no events left but transactions are unfinished".into());
            };
            self.now = next.at;
            if self.now > time_limit {
                return Err(format!(
                    "not finished after {} ms of virtual time; requests still unanswered: {}",
                    self.now,
                    self.unanswered().join("; ")
                ));
            }
            match next.event {
                Event::Wake { client, slot, conn } => self.wake(client, slot, conn)?,
                Event::ToNode { conn, req, repeat } => self.deliver_to_node(conn, req, repeat)?,
                Event::ToClient {
                    conn,
                    trans,
                    request,
                    repeat,
                } => self.deliver_to_client(conn, trans, request, repeat)?,
                other => self.network_event(other)?,
            }
        }
        self.report.virtual_ms = self.now;
        Ok(())
    }

    /// Events between data nodes, and their timers.
    fn network_event(&mut self, event: Event) -> Result<(), String> {
        match event {
            Event::Tick => {
                for id in 1..=self.opts.data_nodes {
                    let mut out = Vec::new();
                    let now = self.now;
                    self.node(id).tick(now, &mut out);
                    self.handle_outputs(id, out)?;
                }
                let at = self.now + TICK_MS;
                self.schedule(at, Event::Tick);
            }
            Event::NodeMsg { signal } => {
                let to = signal.destination();
                if self.trace {
                    eprintln!("{:>8} ms -> node {to}: {signal:?}", self.now);
                }
                let mut out = Vec::new();
                let now = self.now;
                self.node(to).node_signal(now, signal, &mut out);
                self.handle_outputs(to, out)?;
            }
            _ => unreachable!("client events are handled by the caller"),
        }
        Ok(())
    }

    fn unanswered(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (i, c) in self.clients.iter().enumerate() {
            for t in c.slots.iter().flatten() {
                if let Some(req) = &t.in_flight {
                    v.push(format!(
                        "client {i} conn {} trans {}: {req:?}",
                        c.conn, t.trans.0
                    ));
                }
            }
        }
        v
    }

    fn wake(&mut self, client: usize, slot: usize, conn: ConnId) -> Result<(), String> {
        if self.clients[client].conn != conn {
            return Ok(()); // scheduled before a reconnect
        }
        match &self.clients[client].slots[slot] {
            None if self.started < self.opts.transactions => {
                let trans = TransId(self.next_trans);
                self.next_trans += 1;
                self.started += 1;
                self.clients[client].slots[slot] = Some(Txn::new(trans));
                self.send_request(client, slot)
            }
            None => Ok(()),
            Some(t) if t.in_flight.is_none() && t.undelivered.is_none() => {
                self.send_request(client, slot)
            }
            Some(t) => Err(format!("slot woke while transaction {} is busy", t.trans.0)),
        }
    }

    fn plan_request(&mut self, requests_sent: u32, after_long_idle: bool) -> Request {
        let last = requests_sent + 1 >= MAX_REQUESTS_PER_TXN;
        let exec = match self.rng.random_range(0..100) {
            0..=9 => ExecType::Rollback,
            _ if last => ExecType::Commit,
            10..=54 => ExecType::NoCommit,
            _ => ExecType::Commit,
        };
        let first = requests_sent == 0;
        let n = match exec {
            ExecType::Rollback => 0,
            _ if first => self.rng.random_range(1..=MAX_OPS_PER_REQUEST),
            _ => self.rng.random_range(0..=MAX_OPS_PER_REQUEST),
        };
        let ops = (0..n).map(|_| self.plan_op()).collect();
        Request {
            exec,
            ops,
            arrived_at_seq: None,
            first,
            after_long_idle,
        }
    }

    fn plan_op(&mut self) -> PlannedOp {
        let kind = match self.rng.random_range(0..100) {
            0..=19 => OpKind::Read(LockMode::CommittedRead),
            20..=29 => OpKind::Read(LockMode::Shared),
            30..=39 => OpKind::Read(LockMode::Exclusive),
            40..=54 => OpKind::Insert,
            55..=69 => OpKind::Update {
                only_v: self.rng.random_bool(0.5),
            },
            70..=84 => OpKind::Write,
            _ => OpKind::Delete,
        };
        let s = if self.rng.random_bool(0.3) {
            None
        } else {
            let len = self.rng.random_range(0..=16);
            Some(
                (0..len)
                    .map(|_| self.rng.random_range(b'a'..=b'z') as char)
                    .collect(),
            )
        };
        PlannedOp {
            kind,
            key: self.rng.random_range(0..self.load.keys),
            row: Row {
                v: self.rng.random_range(-1000..1000),
                s,
            },
            ignore: kind != OpKind::Write && self.rng.random_bool(0.7),
        }
    }

    fn encode(&self, op: &PlannedOp) -> KeyOp {
        let mut key = Vec::new();
        self.layout
            .encode_key(&[Value::UInt(u64::from(op.key))], &mut key)
            .expect("key fits");
        let v = Value::Int(op.row.v);
        let s = op.row.s.clone().map_or(Value::Null, Value::Str);
        let mut attrs = Vec::new();
        let (op_type, lock) = match op.kind {
            OpKind::Read(lock) => {
                attrs.extend_from_slice(&ALL_COLUMNS.to_le_bytes());
                (OpType::Read, lock)
            }
            OpKind::Insert | OpKind::Write | OpKind::Update { only_v: false } => {
                encode_attrs(&self.def, &[(V_COL, &v), (S_COL, &s)], &mut attrs)
                    .expect("values fit");
                let t = match op.kind {
                    OpKind::Insert => OpType::Insert,
                    OpKind::Write => OpType::Write,
                    _ => OpType::Update,
                };
                (t, LockMode::Exclusive)
            }
            OpKind::Update { only_v: true } => {
                encode_attrs(&self.def, &[(V_COL, &v)], &mut attrs).expect("values fit");
                (OpType::Update, LockMode::Exclusive)
            }
            OpKind::Delete => (OpType::Delete, LockMode::Exclusive),
        };
        KeyOp {
            op: op_type,
            lock,
            flags: if op.ignore { OP_IGNORE_ERROR } else { 0 },
            table: TABLE,
            version: VERSION,
            key,
            attrs,
        }
    }

    fn send_request(&mut self, client: usize, slot: usize) -> Result<(), String> {
        let (requests_sent, long_idle, trans) = {
            let t = self.clients[client].slots[slot].as_ref().expect("active");
            (t.requests_sent, t.idled_long, t.trans)
        };
        let req = self.plan_request(requests_sent, long_idle);
        let wire = TcKeyReq {
            trans,
            request: requests_sent,
            exec: req.exec,
            ops: req.ops.iter().map(|op| self.encode(op)).collect(),
        };
        self.report.requests += 1;
        self.report.operations += req.ops.len() as u64;
        let t = self.clients[client].slots[slot].as_mut().expect("active");
        t.requests_sent += 1;
        t.idled_long = false;
        t.in_flight = Some(req);
        let conn = self.clients[client].conn;
        let copy = wire.clone();
        let at = self.send(
            Lane::ToNode(conn),
            Event::ToNode {
                conn,
                req: wire,
                repeat: false,
            },
        );
        self.maybe_repeat(at, || Event::ToNode {
            conn,
            req: copy,
            repeat: true,
        });
        Ok(())
    }

    fn deliver_to_node(&mut self, conn: ConnId, req: TcKeyReq, repeat: bool) -> Result<(), String> {
        let Some(&client) = self.conn_owner.get(&conn) else {
            return Ok(()); // the connection broke while this was in flight
        };
        let node = self.conn_node[&conn];
        if repeat {
            if self.trace {
                eprintln!(
                    "{:>8} ms conn {conn} trans {} -> node: repeat of request {}",
                    self.now, req.trans.0, req.request
                );
            }
            let mut out = Vec::new();
            let now = self.now;
            self.node(node)
                .client_signal(now, conn, Signal::TcKeyReq(req), &mut out)
                .map_err(|e| format!("node {node} refused a repeated request: {e}"))?;
            return self.handle_outputs(node, out);
        }
        if self.rng.random_bool(P_DISCONNECT) {
            return self.disconnect(client);
        }
        // The request may see any commit from before the oldest one still
        // in progress on.
        let seq = self
            .in_progress
            .values()
            .map(|&s| s - 1)
            .fold(self.model.seq(), u64::min);
        let t = self.clients[client]
            .slots
            .iter_mut()
            .flatten()
            .find(|t| t.trans == req.trans)
            .ok_or("request of an unknown transaction")?;
        let planned = t
            .in_flight
            .as_mut()
            .ok_or("request with nothing in flight")?;
        planned.arrived_at_seq = Some(seq);
        if self.trace {
            eprintln!(
                "{:>8} ms conn {conn} trans {} -> node: {planned:?}",
                self.now, req.trans.0
            );
        }
        let mut out = Vec::new();
        let now = self.now;
        self.node(node)
            .client_signal(now, conn, Signal::TcKeyReq(req), &mut out)
            .map_err(|e| format!("node {node} refused a well-formed request: {e}"))?;
        self.handle_outputs(node, out)
    }

    fn disconnect(&mut self, client: usize) -> Result<(), String> {
        self.report.disconnects += 1;
        let old = self.clients[client].conn;
        if self.trace {
            eprintln!("{:>8} ms conn {old} disconnects", self.now);
        }
        self.conn_owner.remove(&old);
        let node = self.conn_node[&old];
        let mut out = Vec::new();
        let now = self.now;
        self.node(node).client_disconnected(now, old, &mut out);
        self.handle_outputs(node, out)?;
        for slot in &mut self.clients[client].slots {
            if let Some(t) = slot.take() {
                self.report.abandoned += 1;
                // A request the node took may still commit (its last
                // replica may have committed already): keep what it does.
                if t.in_flight
                    .as_ref()
                    .is_some_and(|r| r.arrived_at_seq.is_some())
                {
                    self.orphans.insert((old, t.trans), t);
                }
            }
        }
        let conn = self.new_conn(client);
        self.clients[client].conn = conn;
        for slot in 0..self.load.slots {
            let at = self.now + self.rng.random_range(1..=50);
            self.schedule(at, Event::Wake { client, slot, conn });
        }
        Ok(())
    }

    /// Routes what one kernel call of data node `from` produced: signals
    /// for other nodes onto the network, answers to the checker and then
    /// to their clients.
    ///
    /// Commit points (and commit confirmations) of the batch are checked,
    /// and applied to the model, before the other answers: a commit
    /// releases locks inside the call, so an operation that waited for them
    /// may be answered before the commit is — yet it ran after it.
    fn handle_outputs(&mut self, from: u16, out: Vec<Output>) -> Result<(), String> {
        let mut answers = Vec::with_capacity(out.len());
        let mut done = Vec::new();
        for output in out {
            let (conn, answer) = match output {
                Output::ToNode { node, signal } => {
                    let copy = signal.clone();
                    let lane = Lane::Nodes { from, to: node };
                    let at = self.send(lane, Event::NodeMsg { signal });
                    self.maybe_repeat(at, || Event::NodeMsg { signal: copy });
                    continue;
                }
                Output::Send { conn, signal } => (conn, Answer::Signal(signal)),
                Output::CommitPoint {
                    conn,
                    trans,
                    results,
                } => (conn, Answer::CommitPoint(trans, results)),
                Output::CommitDone { conn, trans, txn } => {
                    // "Every replica holds the commit": check it.
                    for (i, n) in self.nodes.iter().enumerate() {
                        let coordinator = shoal_kernel::signal::tc_node_of(txn);
                        if let Some(r) = n
                            .replica_transactions(coordinator)
                            .iter()
                            .find(|r| r.txn == txn)
                        {
                            if r.pending_rows != 0 {
                                return Err(format!(
                                    "node {from} reported the commit of conn {conn} trans {} done, but node {} still holds {} uncommitted row(s) of it",
                                    trans.0,
                                    i + 1,
                                    r.pending_rows
                                ));
                            }
                        }
                    }
                    done.push((conn, trans));
                    continue;
                }
            };
            if let Some((direct, answered)) = &mut self.direct {
                if *direct == conn {
                    match answer {
                        Answer::Signal(signal) => *answered = Some(signal),
                        Answer::CommitPoint(..) => {}
                    }
                    continue;
                }
            }
            if !self.conn_owner.contains_key(&conn) {
                // Only a commit point may come after the client left.
                if let Answer::CommitPoint(trans, results) = &answer {
                    if let Some(t) = self.orphans.remove(&(conn, *trans)) {
                        self.orphan_committed(conn, t, results)?;
                        continue;
                    }
                }
                return Err(format!(
                    "node {from} answered connection {conn}, which is closed: {answer:?}"
                ));
            }
            let client = self.conn_owner[&conn];
            if self.conn_node[&conn] != from {
                return Err(format!(
                    "node {from} answered connection {conn}, which is to node {}",
                    self.conn_node[&conn]
                ));
            }
            let (trans, request, code) = match &answer {
                Answer::Signal(Signal::TcKeyConf(c)) => (c.trans, Some(c.request), c.state as u16),
                Answer::Signal(Signal::TcKeyRef(r)) => (r.trans, Some(r.request), r.code),
                Answer::CommitPoint(trans, _) => (*trans, None, u16::MAX),
                Answer::Signal(other) => return Err(format!("node sent a client {other:?}")),
            };
            self.digest(&[self.now, conn, trans.0, u64::from(code)]);
            if self.trace {
                eprintln!(
                    "{:>8} ms conn {conn} trans {} <- node {from}: {answer:?}",
                    self.now, trans.0
                );
            }
            // An answer for a request the client does not wait for can
            // only answer a repeated request: it must refuse it.
            let waited_for = self.clients[client]
                .slots
                .iter()
                .flatten()
                .find(|t| t.trans == trans)
                .is_some_and(|t| {
                    (t.in_flight.is_some() || t.commit_point.is_some())
                        && request.is_none_or(|r| r + 1 == t.requests_sent)
                });
            if !waited_for {
                let refusal = match &answer {
                    Answer::Signal(Signal::TcKeyRef(r)) => {
                        r.code == ErrorCode::BadRequest as u16
                            || r.code == ErrorCode::TransactionNotFound as u16
                    }
                    Answer::Signal(Signal::TcKeyConf(c)) => {
                        c.state == TransState::Aborted && c.results.is_empty()
                    }
                    _ => false,
                };
                if !refusal {
                    return Err(format!(
                        "node {from} served a repeated request of conn {conn} trans {}: {answer:?}",
                        trans.0
                    ));
                }
                self.report.repeats_refused += 1;
                let request = request.expect("a signal");
                self.send(
                    Lane::ToClient(conn),
                    Event::ToClient {
                        conn,
                        trans,
                        request,
                        repeat: true,
                    },
                );
                continue;
            }
            answers.push((client, conn, trans, request, answer));
        }
        let first = |a: &Answer| {
            matches!(a, Answer::CommitPoint(..))
                || matches!(a, Answer::Signal(Signal::TcKeyConf(c)) if c.state == TransState::Committed)
        };
        let firsts = answers.iter().filter(|a| first(&a.4));
        let others = answers.iter().filter(|a| !first(&a.4));
        for (client, _, trans, _, answer) in firsts.chain(others) {
            self.check_answer(*client, *trans, answer)?;
        }
        for (conn, trans) in done {
            let checker_request = self.direct.as_ref().is_some_and(|(c, _)| *c == conn);
            if self.in_progress.remove(&(conn, trans)).is_none() && !checker_request {
                return Err(format!(
                    "node {from} finished a commit of conn {conn} trans {} that never reached its commit point",
                    trans.0
                ));
            }
        }
        for (_, conn, trans, request, answer) in answers {
            if let (Answer::Signal(_), Some(request)) = (answer, request) {
                let at = self.send(
                    Lane::ToClient(conn),
                    Event::ToClient {
                        conn,
                        trans,
                        request,
                        repeat: false,
                    },
                );
                self.maybe_repeat(at, || Event::ToClient {
                    conn,
                    trans,
                    request,
                    repeat: true,
                });
            }
        }
        Ok(())
    }

    /// The commit point of a transaction whose client disconnected while
    /// its last request was in flight: check it and apply it to the model.
    fn orphan_committed(
        &mut self,
        conn: ConnId,
        mut t: Txn,
        results: &[OpResult],
    ) -> Result<(), String> {
        let conf = TcKeyConf {
            trans: t.trans,
            request: t.requests_sent - 1,
            state: TransState::Committed,
            results: results.to_vec(),
        };
        let outcome = t
            .check_conf(&conf, &self.model, &self.def)
            .map_err(|e| format!("orphaned transaction {}: {e}", t.trans.0))?;
        let Outcome::Committed(writes) = outcome else {
            return Err(format!(
                "orphaned transaction {} committed as {outcome:?}",
                t.trans.0
            ));
        };
        self.report.committed += 1;
        self.model.commit(writes);
        self.in_progress.insert((conn, t.trans), self.model.seq());
        Ok(())
    }

    fn check_answer(
        &mut self,
        client: usize,
        trans: TransId,
        answer: &Answer,
    ) -> Result<(), String> {
        let conn = self.clients[client].conn;
        let model = &self.model;
        let def = &self.def;
        let t = self.clients[client]
            .slots
            .iter_mut()
            .flatten()
            .find(|t| t.trans == trans)
            .ok_or_else(|| format!("answer for unknown transaction {}: {answer:?}", trans.0))?;
        let outcome = match answer {
            Answer::CommitPoint(_, results) => {
                // TC decided to commit: check the request's results as the
                // confirmation will carry them, and commit in the model.
                let conf = TcKeyConf {
                    trans,
                    request: t.requests_sent - 1,
                    state: TransState::Committed,
                    results: results.clone(),
                };
                let outcome = t.check_conf(&conf, model, def);
                t.commit_point = Some(results.clone());
                outcome
            }
            Answer::Signal(Signal::TcKeyConf(c)) if t.commit_point.is_some() => {
                let expected = t.commit_point.take().expect("checked");
                if c.state != TransState::Committed || c.results != expected {
                    Err(format!(
                        "after its commit point the transaction was answered {c:?}, expected Committed with {expected:?}"
                    ))
                } else {
                    t.undelivered = Some(Outcome::Committed(Vec::new()));
                    return Ok(());
                }
            }
            Answer::Signal(Signal::TcKeyConf(c)) => t.check_conf(c, model, def),
            Answer::Signal(Signal::TcKeyRef(r)) if t.commit_point.is_some() => Err(format!(
                "refused after its commit point: {r:?}"
            )),
            Answer::Signal(Signal::TcKeyRef(r)) => t.check_ref(r, model),
            Answer::Signal(_) => unreachable!("only answers are collected"),
        }
        .map_err(|e| {
            format!(
                "client {client} transaction {}: {e}\nanswer: {answer:?}",
                trans.0
            )
        })?;
        match &outcome {
            Outcome::Committed(writes) => {
                if self.trace {
                    eprintln!(
                        "{:>8} ms commit #{}: {writes:?}",
                        self.now,
                        self.model.seq() + 1
                    );
                }
                self.report.committed += 1;
                self.model.commit(writes.iter().cloned());
                if matches!(answer, Answer::CommitPoint(..)) {
                    self.in_progress.insert((conn, trans), self.model.seq());
                }
            }
            Outcome::RolledBack => self.report.rolled_back += 1,
            Outcome::Failed(code) => *self.report.failed.entry(*code).or_default() += 1,
            Outcome::Open => {}
        }
        if !matches!(answer, Answer::CommitPoint(..)) {
            t.undelivered = Some(outcome);
        }
        Ok(())
    }

    /// The client takes an answer if it is to the request it waits for
    /// (as the client library does), and drops any other.
    fn deliver_to_client(
        &mut self,
        conn: ConnId,
        trans: TransId,
        request: u32,
        repeat: bool,
    ) -> Result<(), String> {
        let Some(&client) = self.conn_owner.get(&conn) else {
            return Ok(());
        };
        let slot = self.clients[client].slots.iter().position(|s| {
            s.as_ref().is_some_and(|t| {
                t.trans == trans && t.undelivered.is_some() && request + 1 == t.requests_sent
            })
        });
        let slot = match (slot, repeat) {
            (Some(_), true) => {
                return Err(format!(
                    "a repeated answer (trans {} request {request}) would be taken as the awaited one",
                    trans.0
                ))
            }
            (None, true) => return Ok(()),
            (None, false) => {
                return Err(format!(
                    "answer to trans {} request {request} delivered, but the client does not wait for it",
                    trans.0
                ))
            }
            (Some(slot), false) => slot,
        };
        let t = self.clients[client].slots[slot].as_mut().expect("found");
        let outcome = t.undelivered.take().expect("checked");
        let idle = if outcome == Outcome::Open {
            if self.rng.random_bool(P_LONG_IDLE) {
                t.idled_long = true;
                self.rng.random_range(LONG_IDLE_MS..LONG_IDLE_MS + 500)
            } else {
                self.rng.random_range(0..=40)
            }
        } else {
            self.clients[client].slots[slot] = None;
            self.rng.random_range(0..=20)
        };
        let at = self.now + idle;
        self.schedule(at, Event::Wake { client, slot, conn });
        Ok(())
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

    /// Runs the network until no signal between nodes is in flight and
    /// every node is idle, or gives up after `limit_ms` of virtual time.
    fn quiesce(&mut self, limit_ms: u64) -> Result<(), String> {
        let limit = self.now + limit_ms;
        loop {
            let in_flight = self
                .events
                .iter()
                .any(|e| matches!(e.event, Event::NodeMsg { .. }));
            let busy = self
                .nodes
                .iter()
                .any(|n| n.stats().transactions != 0 || n.stats().operations != 0);
            if !in_flight && !busy {
                return Ok(());
            }
            let Some(next) = self.events.pop() else {
                return Err("no events left while nodes are busy".into());
            };
            self.now = next.at;
            if self.now > limit {
                let stats: Vec<_> = self.nodes.iter().map(|n| n.stats()).collect();
                return Err(format!(
                    "nodes still busy {limit_ms} ms after the last client left: {stats:?}"
                ));
            }
            // Client traffic left over is for connections that are gone.
            if let e @ (Event::Tick | Event::NodeMsg { .. }) = next.event {
                self.network_event(e)?;
            }
        }
    }

    /// Runs one request through data node `node` on a fresh connection and
    /// returns its answer.
    fn request(&mut self, node: u16, exec: ExecType, ops: &[PlannedOp]) -> Result<Signal, String> {
        let conn = self.next_conn;
        self.next_conn += 1;
        self.conn_node.insert(conn, node);
        let trans = TransId(self.next_trans);
        self.next_trans += 1;
        let req = TcKeyReq {
            trans,
            request: 0,
            exec,
            ops: ops.iter().map(|op| self.encode(op)).collect(),
        };
        self.direct = Some((conn, None));
        let mut out = Vec::new();
        let now = self.now;
        self.node(node)
            .client_signal(now, conn, Signal::TcKeyReq(req), &mut out)
            .map_err(|e| e.to_string())?;
        self.handle_outputs(node, out)?;
        self.quiesce(60_000)?;
        let (_, answer) = self.direct.take().expect("set above");
        answer.ok_or_else(|| format!("no answer from node {node} to a request of the checker"))
    }

    fn final_checks(&mut self) -> Result<(), String> {
        // Every client goes away; nothing may be answered, nothing left.
        let conns: Vec<ConnId> = self.clients.iter().map(|c| c.conn).collect();
        for conn in conns {
            let node = self.conn_node[&conn];
            self.conn_owner.remove(&conn);
            let mut out = Vec::new();
            let now = self.now;
            self.node(node).client_disconnected(now, conn, &mut out);
            if out.iter().any(|o| !matches!(o, Output::ToNode { .. })) {
                return Err(format!("answers after every transaction ended: {out:?}"));
            }
            self.handle_outputs(node, out)?;
        }
        self.quiesce(60_000)?;
        for (i, n) in self.nodes.iter().enumerate() {
            let stats = n.stats();
            if stats.transactions != 0 || stats.operations != 0 {
                return Err(format!(
                    "leak on node {}: {} transactions and {} operation records remain with no client",
                    i + 1,
                    stats.transactions,
                    stats.operations
                ));
            }
        }

        // Every replica of every fragment holds the same rows, and together
        // they hold exactly what the model says.
        let mut found: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
        for frag in 0..self.map.fragments.len() as u32 {
            let replicas = self.map.replicas(frag).to_vec();
            let primary_image = self.nodes[replicas[0] as usize - 1]
                .fragment_image(TABLE, frag)
                .ok_or_else(|| format!("fragment {frag} missing on its primary {}", replicas[0]))?;
            for &r in &replicas[1..] {
                let image = self.nodes[r as usize - 1]
                    .fragment_image(TABLE, frag)
                    .ok_or_else(|| format!("fragment {frag} missing on replica node {r}"))?;
                if image != primary_image {
                    return Err(format!(
                        "replicas of fragment {frag} differ: node {} has {} rows, node {r} has {}",
                        replicas[0],
                        primary_image.len(),
                        image.len()
                    ));
                }
            }
            for row in primary_image {
                let key = decode_key_column(&row, &self.def)?;
                if found.insert(key, row).is_some() {
                    return Err(format!("key {key} is in two fragments"));
                }
            }
        }
        for key in 0..self.load.keys {
            let got = match found.get(&key) {
                Some(data) => decode_read(
                    &OpResult {
                        code: 0,
                        data: data.clone(),
                    },
                    key,
                    &self.def,
                )?,
                None => None,
            };
            if &got != self.model.current(key) {
                return Err(format!(
                    "final contents differ at key {key}: the cluster has {got:?}, the model {:?}",
                    self.model.current(key)
                ));
            }
        }
        self.report.final_rows = self.model.row_count();

        // Reads through the network agree (from the last node, which need
        // not hold the keys' primaries).
        let reads: Vec<PlannedOp> = (0..self.load.keys)
            .map(|key| PlannedOp {
                kind: OpKind::Read(LockMode::CommittedRead),
                key,
                row: Row { v: 0, s: None },
                ignore: true,
            })
            .collect();
        let last = self.opts.data_nodes;
        match self.request(last, ExecType::Commit, &reads)? {
            Signal::TcKeyConf(conf) => {
                for (key, res) in (0..self.load.keys).zip(&conf.results) {
                    let got = decode_read(res, key, &self.def)?;
                    if &got != self.model.current(key) {
                        return Err(format!(
                            "final read of key {key} through node {last}: {got:?}, model {:?}",
                            self.model.current(key)
                        ));
                    }
                }
            }
            other => return Err(format!("final read refused: {other:?}")),
        }

        // Deleting everything gives back all memory but the fixed-size row
        // pages, which each fragment keeps for its next rows (one page per
        // fragment holds all of its rows here).
        let deletes: Vec<PlannedOp> = (0..self.load.keys)
            .map(|key| PlannedOp {
                kind: OpKind::Delete,
                key,
                row: Row { v: 0, s: None },
                ignore: true,
            })
            .collect();
        match self.request(1, ExecType::Commit, &deletes)? {
            Signal::TcKeyConf(_) => {}
            other => return Err(format!("final delete refused: {other:?}")),
        }
        for (i, n) in self.nodes.iter().enumerate() {
            let node_id = i as u16 + 1;
            let local = (0..self.map.fragments.len() as u32)
                .filter(|&f| self.map.replicas(f).contains(&node_id))
                .count() as u64;
            let kept = self.empty_memory_bytes[i] + local * shoal_storage::PAGE_BYTES as u64;
            let stats = n.stats();
            if stats.rows != 0 || stats.data_memory_used_bytes > kept {
                return Err(format!(
                    "node {node_id} after deleting every row: {} rows, {} bytes of data memory used (expected at most {kept})",
                    stats.rows, stats.data_memory_used_bytes
                ));
            }
        }
        Ok(())
    }
}

/// The key column of a row image (an attribute list of all columns).
fn decode_key_column(row: &[u8], def: &TableDef) -> Result<u32, String> {
    let (attrs, _) = AttrSlice::parse(row).map_err(|e| format!("row image: {e}"))?;
    for (col, bytes) in attrs.iter() {
        if col == K_COL {
            let bytes = bytes.ok_or("NULL key")?;
            return match shoal_types::value::decode_value(def.columns[0].ty, bytes) {
                Value::UInt(k) => Ok(k as u32),
                other => Err(format!("key column is {other:?}")),
            };
        }
    }
    Err("row image without its key column".into())
}
