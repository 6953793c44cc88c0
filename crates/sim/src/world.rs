//! The simulated world: one data node (the real kernel blocks), a few
//! clients with several transactions each, a network between them, virtual
//! time and one seeded RNG that decides everything random.
//!
//! The network delays every message by a random time; messages of one
//! connection keep their order (TCP), messages of different connections
//! are reordered freely. A lost message is a broken connection: the node
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
use shoal_kernel::{ConnId, DataNode, KernelConfig, Output};
use shoal_types::distribution::DistributionSpec;
use shoal_types::layout::encode_attrs;
use shoal_types::{
    ColumnDef, ColumnType, RowLayout, SchemaVersion, TableDef, TableId, TransId, Value,
};
use shoal_wire::{
    ExecType, KeyOp, LockMode, OpType, Signal, TcKeyReq, TransState, ALL_COLUMNS, OP_IGNORE_ERROR,
};

use crate::model::{Model, Row};
use crate::txn::{decode_read, OpKind, Outcome, PlannedOp, Request, Txn, S_COL, V_COL};

const CLIENTS: usize = 5;
/// Transactions each client keeps going at once.
const SLOTS: usize = 3;
/// A small key space, so transactions meet on the same rows.
const KEYS: u32 = 32;
const MAX_DELAY_MS: u64 = 15;
const TICK_MS: u64 = 10;
const DEADLOCK_TIMEOUT_MS: u64 = 200;
const INACTIVE_TIMEOUT_MS: u64 = 1500;
/// Below the CLIENTS × SLOTS transactions that may exist at once, so the
/// limit is met and must give a clean error.
const MAX_CONCURRENT_TRANSACTIONS: usize = 14;
const MAX_REQUESTS_PER_TXN: u32 = 4;
const MAX_OPS_PER_REQUEST: usize = 4;
/// Chance that a client→node message is lost, breaking its connection.
const P_DISCONNECT: f64 = 0.004;
/// Chance that a client leaves an open transaction idle past the
/// inactivity timeout.
const P_LONG_IDLE: f64 = 0.01;
/// Long enough that the node surely aborted the idle transaction: the
/// timeout, plus both message delays, plus tick granularity.
const LONG_IDLE_MS: u64 = INACTIVE_TIMEOUT_MS + 2 * MAX_DELAY_MS + 3 * TICK_MS + 50;
const TABLE: TableId = TableId(1);
const NODE_ID: u16 = 1;
/// The table is split into this many fragments, all on the one node.
const FRAGMENTS: u32 = 4;
const VERSION: SchemaVersion = SchemaVersion(1);

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub seed: u64,
    /// Transactions to start in total.
    pub transactions: u64,
}

/// What happened in a run (equal for equal options: runs are deterministic).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimReport {
    pub seed: u64,
    pub transactions: u64,
    pub committed: u64,
    pub rolled_back: u64,
    /// Transactions the node refused and aborted, by error code.
    pub failed: BTreeMap<u16, u64>,
    /// Transactions whose client lost its connection before hearing the end.
    pub abandoned: u64,
    pub disconnects: u64,
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
            "seed {}: {} txns ({} committed, {} rolled back, failed [{}], {} abandoned), {} disconnects, {} requests, {} ops, {:.1} s virtual, {} rows at end",
            self.seed,
            self.transactions,
            self.committed,
            self.rolled_back,
            failed.join(" "),
            self.abandoned,
            self.disconnects,
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
    pub virtual_ms: u64,
    pub message: String,
}

impl SimFailure {
    /// The command that replays this run.
    pub fn replay_command(&self) -> String {
        format!(
            "cargo run --release -p shoal-sim -- --seed {} --txns {}",
            self.seed, self.transactions
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
            virtual_ms: world.now,
            message,
        }),
    }
}

pub fn table_def() -> TableDef {
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
    def.distribution = Some(DistributionSpec::single_node(NODE_ID, FRAGMENTS));
    def
}

enum Event {
    /// A client's request reaches the node.
    ToNode {
        conn: ConnId,
        req: TcKeyReq,
    },
    /// The node's answer for `trans` reaches the client.
    ToClient {
        conn: ConnId,
        trans: TransId,
    },
    /// A client's transaction slot acts (starts or continues a transaction).
    Wake {
        client: usize,
        slot: usize,
        conn: ConnId,
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

struct Client {
    conn: ConnId,
    slots: Vec<Option<Txn>>,
}

struct World {
    opts: SimOptions,
    rng: SmallRng,
    now: u64,
    events: BinaryHeap<Scheduled>,
    next_event_seq: u64,
    /// Delivery time of the last message per (connection, towards node):
    /// later messages of the lane are never delivered earlier.
    lane_clock: HashMap<(ConnId, bool), u64>,
    node: DataNode,
    def: TableDef,
    layout: RowLayout,
    model: Model,
    clients: Vec<Client>,
    /// Current connection → client.
    conn_owner: HashMap<ConnId, usize>,
    next_conn: ConnId,
    next_trans: u64,
    started: u64,
    empty_memory_bytes: u64,
    report: SimReport,
    /// `SHOAL_SIM_TRACE=1`: print every request and answer (to debug a seed).
    trace: bool,
}

impl World {
    fn new(opts: &SimOptions) -> World {
        let def = table_def();
        let mut node = DataNode::new(KernelConfig {
            node_id: NODE_ID,
            data_memory_bytes: 64 << 20,
            max_concurrent_transactions: MAX_CONCURRENT_TRANSACTIONS,
            max_concurrent_operations: 100_000,
            max_operations_per_transaction: 1000,
            deadlock_timeout_ms: DEADLOCK_TIMEOUT_MS,
            transaction_inactive_timeout_ms: INACTIVE_TIMEOUT_MS,
        });
        node.create_table(&def);
        let empty_memory_bytes = node.stats().data_memory_used_bytes;
        let mut world = World {
            opts: opts.clone(),
            rng: SmallRng::seed_from_u64(opts.seed),
            now: 1_000,
            events: BinaryHeap::new(),
            next_event_seq: 0,
            lane_clock: HashMap::new(),
            node,
            layout: RowLayout::new(&def),
            def,
            model: Model::new(KEYS),
            clients: Vec::new(),
            conn_owner: HashMap::new(),
            next_conn: 1,
            next_trans: 1,
            started: 0,
            empty_memory_bytes,
            report: SimReport {
                seed: opts.seed,
                transactions: opts.transactions,
                ..SimReport::default()
            },
            trace: std::env::var_os("SHOAL_SIM_TRACE").is_some_and(|v| v == "1"),
        };
        for client in 0..CLIENTS {
            let conn = world.new_conn(client);
            world.clients.push(Client {
                conn,
                slots: (0..SLOTS).map(|_| None).collect(),
            });
            for slot in 0..SLOTS {
                let at = world.now + world.rng.random_range(0..50);
                world.schedule(at, Event::Wake { client, slot, conn });
            }
        }
        let at = world.now + TICK_MS;
        world.schedule(at, Event::Tick);
        world
    }

    fn new_conn(&mut self, client: usize) -> ConnId {
        let conn = self.next_conn;
        self.next_conn += 1;
        self.conn_owner.insert(conn, client);
        conn
    }

    fn schedule(&mut self, at: u64, event: Event) {
        self.events.push(Scheduled {
            at,
            seq: self.next_event_seq,
            event,
        });
        self.next_event_seq += 1;
    }

    /// Schedules a message on a connection's lane: a random delay, but
    /// never before the lane's previous message.
    fn send(&mut self, conn: ConnId, to_node: bool, event: Event) {
        let earliest = self.now + self.rng.random_range(0..=MAX_DELAY_MS);
        let lane = self.lane_clock.entry((conn, to_node)).or_insert(0);
        let at = earliest.max(*lane);
        *lane = at;
        self.schedule(at, event);
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
                Event::Tick => {
                    let mut out = Vec::new();
                    self.node.tick(self.now, &mut out);
                    self.handle_outputs(out)?;
                    let at = self.now + TICK_MS;
                    self.schedule(at, Event::Tick);
                }
                Event::Wake { client, slot, conn } => self.wake(client, slot, conn)?,
                Event::ToNode { conn, req } => self.deliver_to_node(conn, req)?,
                Event::ToClient { conn, trans } => self.deliver_to_client(conn, trans)?,
            }
        }
        self.report.virtual_ms = self.now;
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
            key: self.rng.random_range(0..KEYS),
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
        self.send(conn, true, Event::ToNode { conn, req: wire });
        Ok(())
    }

    fn deliver_to_node(&mut self, conn: ConnId, req: TcKeyReq) -> Result<(), String> {
        let Some(&client) = self.conn_owner.get(&conn) else {
            return Ok(()); // the connection broke while this was in flight
        };
        if self.rng.random_bool(P_DISCONNECT) {
            return self.disconnect(client);
        }
        let seq = self.model.seq();
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
        self.node
            .client_signal(self.now, conn, Signal::TcKeyReq(req), &mut out)
            .map_err(|e| format!("node refused a well-formed request: {e}"))?;
        self.handle_outputs(out)
    }

    fn disconnect(&mut self, client: usize) -> Result<(), String> {
        self.report.disconnects += 1;
        let old = self.clients[client].conn;
        if self.trace {
            eprintln!("{:>8} ms conn {old} disconnects", self.now);
        }
        self.conn_owner.remove(&old);
        let mut out = Vec::new();
        self.node.client_disconnected(self.now, old, &mut out);
        self.handle_outputs(out)?;
        for slot in &mut self.clients[client].slots {
            if slot.take().is_some() {
                self.report.abandoned += 1;
            }
        }
        let conn = self.new_conn(client);
        self.clients[client].conn = conn;
        for slot in 0..SLOTS {
            let at = self.now + self.rng.random_range(1..=50);
            self.schedule(at, Event::Wake { client, slot, conn });
        }
        Ok(())
    }

    /// Checks the answers of one kernel call and sends them to the clients.
    ///
    /// The commit confirmations of the batch are checked (and applied to the
    /// model) before the other answers: a commit releases its locks inside
    /// the call, so an operation that waited for them may be answered
    /// before the commit is — yet it ran after the commit.
    fn handle_outputs(&mut self, out: Vec<Output>) -> Result<(), String> {
        let mut answers = Vec::with_capacity(out.len());
        for Output::Send { conn, signal } in out {
            let client = *self.conn_owner.get(&conn).ok_or_else(|| {
                format!("node answered connection {conn}, which is closed: {signal:?}")
            })?;
            let (trans, code) = match &signal {
                Signal::TcKeyConf(c) => (c.trans, c.state as u16),
                Signal::TcKeyRef(r) => (r.trans, r.code),
                other => return Err(format!("node sent a client {other:?}")),
            };
            self.digest(&[self.now, conn, trans.0, u64::from(code)]);
            if self.trace {
                eprintln!(
                    "{:>8} ms conn {conn} trans {} <- node: {signal:?}",
                    self.now, trans.0
                );
            }
            answers.push((client, conn, trans, signal));
        }
        let is_commit =
            |s: &Signal| matches!(s, Signal::TcKeyConf(c) if c.state == TransState::Committed);
        let commits = answers.iter().filter(|a| is_commit(&a.3));
        let others = answers.iter().filter(|a| !is_commit(&a.3));
        for (client, _, trans, signal) in commits.chain(others) {
            self.check_answer(*client, *trans, signal)?;
        }
        for (_, conn, trans, _) in answers {
            self.send(conn, false, Event::ToClient { conn, trans });
        }
        Ok(())
    }

    fn check_answer(
        &mut self,
        client: usize,
        trans: TransId,
        signal: &Signal,
    ) -> Result<(), String> {
        let model = &self.model;
        let def = &self.def;
        let t = self.clients[client]
            .slots
            .iter_mut()
            .flatten()
            .find(|t| t.trans == trans)
            .ok_or_else(|| format!("answer for unknown transaction {}: {signal:?}", trans.0))?;
        let outcome = match signal {
            Signal::TcKeyConf(c) => t.check_conf(c, model, def),
            Signal::TcKeyRef(r) => t.check_ref(r, model),
            _ => unreachable!("only answers are collected"),
        }
        .map_err(|e| {
            format!(
                "client {client} transaction {}: {e}\nanswer: {signal:?}",
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
            }
            Outcome::RolledBack => self.report.rolled_back += 1,
            Outcome::Failed(code) => *self.report.failed.entry(*code).or_default() += 1,
            Outcome::Open => {}
        }
        t.undelivered = Some(outcome);
        Ok(())
    }

    fn deliver_to_client(&mut self, conn: ConnId, trans: TransId) -> Result<(), String> {
        let Some(&client) = self.conn_owner.get(&conn) else {
            return Ok(());
        };
        let slot = self.clients[client]
            .slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|t| t.trans == trans))
            .ok_or("answer delivered for a transaction the client does not have")?;
        let t = self.clients[client].slots[slot].as_mut().expect("found");
        let outcome = t.undelivered.take().ok_or("answer delivered twice")?;
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

    /// Runs one request on a fresh connection and returns its answer.
    fn direct(&mut self, exec: ExecType, ops: &[PlannedOp]) -> Result<Signal, String> {
        let conn = self.next_conn;
        self.next_conn += 1;
        let trans = TransId(self.next_trans);
        self.next_trans += 1;
        let req = TcKeyReq {
            trans,
            exec,
            ops: ops.iter().map(|op| self.encode(op)).collect(),
        };
        let mut out = Vec::new();
        self.node
            .client_signal(self.now, conn, Signal::TcKeyReq(req), &mut out)
            .map_err(|e| e.to_string())?;
        let mut gone = Vec::new();
        self.node.client_disconnected(self.now, conn, &mut gone);
        match (out.pop(), out.is_empty(), gone.is_empty()) {
            (Some(Output::Send { signal, .. }), true, true) => Ok(signal),
            other => Err(format!("expected exactly one answer, got {other:?}")),
        }
    }

    fn final_checks(&mut self) -> Result<(), String> {
        // Every client goes away; nothing may be answered, nothing left.
        let conns: Vec<ConnId> = self.clients.iter().map(|c| c.conn).collect();
        for conn in conns {
            let mut out = Vec::new();
            self.node.client_disconnected(self.now, conn, &mut out);
            if !out.is_empty() {
                return Err(format!("answers after every transaction ended: {out:?}"));
            }
            self.conn_owner.remove(&conn);
        }
        for _ in 0..10 {
            self.now += TICK_MS;
            let mut out = Vec::new();
            self.node.tick(self.now, &mut out);
            if !out.is_empty() {
                return Err(format!("answers after every client left: {out:?}"));
            }
        }
        let stats = self.node.stats();
        if stats.transactions != 0 || stats.operations != 0 {
            return Err(format!(
                "leak: {} transactions and {} operation records remain with no client",
                stats.transactions, stats.operations
            ));
        }

        // The node holds exactly what the model says.
        let reads: Vec<PlannedOp> = (0..KEYS)
            .map(|key| PlannedOp {
                kind: OpKind::Read(LockMode::CommittedRead),
                key,
                row: Row { v: 0, s: None },
                ignore: true,
            })
            .collect();
        let answer = self.direct(ExecType::Commit, &reads)?;
        let Signal::TcKeyConf(conf) = answer else {
            return Err(format!("final read refused: {answer:?}"));
        };
        for (key, res) in (0..KEYS).zip(&conf.results) {
            let got = decode_read(res, key, &self.def)?;
            if &got != self.model.current(key) {
                return Err(format!(
                    "final contents differ at key {key}: node has {got:?}, model has {:?}",
                    self.model.current(key)
                ));
            }
        }
        let rows = self.node.stats().rows;
        self.report.final_rows = self.model.row_count();
        if rows != self.report.final_rows {
            return Err(format!(
                "node counts {rows} rows, model {}",
                self.report.final_rows
            ));
        }

        // Deleting everything gives back all memory but the fixed-size row
        // pages, which each fragment keeps for its next rows (one page per
        // fragment holds all of its rows here).
        let deletes: Vec<PlannedOp> = (0..KEYS)
            .map(|key| PlannedOp {
                kind: OpKind::Delete,
                key,
                row: Row { v: 0, s: None },
                ignore: true,
            })
            .collect();
        match self.direct(ExecType::Commit, &deletes)? {
            Signal::TcKeyConf(_) => {}
            other => return Err(format!("final delete refused: {other:?}")),
        }
        let stats = self.node.stats();
        let kept =
            self.empty_memory_bytes + u64::from(FRAGMENTS) * shoal_storage::PAGE_BYTES as u64;
        if stats.rows != 0 || stats.data_memory_used_bytes > kept {
            return Err(format!(
                "after deleting every row: {} rows, {} bytes of data memory used (expected at most {kept})",
                stats.rows, stats.data_memory_used_bytes
            ));
        }
        Ok(())
    }
}
