//! The data node's event loop: accepts clients, runs the handshake, feeds
//! decoded signals to the kernel, writes the kernel's answers in batches
//! (one write per connection per loop turn), ticks the kernel's timers and
//! reports status to mgmd.
//!
//! Data nodes link to each other over TCP with the same handshake and
//! frames (node type "data node", node signals only): the node with the
//! lower id connects, one link per pair, addresses from mgmd. A node
//! reports `Starting` until it has a link to every other data node, then
//! `Started`. Signals for a node whose link is not up yet wait in order.
//! Losing a link is logged; handling the failure (takeover) is the next
//! step of the roadmap.

use crate::conn::{Conn, Phase, ReadOutcome, Role, OUTPUT_BACKLOG_MAX_BYTES};
use crate::mgm_link::{self, LinkEvent, LinkRequest};
use crate::stop_signal;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use shoal_kernel::signal::BlockSignal;
use shoal_kernel::{ConnId, DataNode, KernelConfig, Output};
use shoal_mgmd::{MgmEvent, NodeState, NodeStatus};
use shoal_types::{ErrorCode, ShoalError};
use shoal_wire::{ErrorReport, Hello, HelloReply, NodeType, Signal, HELLO_BYTES};
use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONN: u64 = 2;
const TICK_MS: u64 = 10;
const STATUS_EVERY_MS: u64 = 1000;
/// Outputs that, while input is still being handled, make the node send
/// what it has to the other data nodes (see `send_to_peers_early`).
/// Measured with flexasynch on 2 nodes, R=2: 32 costs a third of the
/// write rate in extra writes and wake-ups, 2048 brings back the idle
/// ping-pong; 512–1024 are best, 768 the steadiest.
const EARLY_SEND_OUTPUTS: usize = 768;
/// Wait between attempts to link to another data node.
const PEER_RETRY_MS: u64 = 200;
/// Signals held for one unlinked data node at most; more is a node that
/// will not come back, and its transactions fail (node failure handling
/// belongs to the next issue).
const PEER_PENDING_MAX: usize = 1 << 20;

pub struct DataNodeOptions {
    /// mgmd's "host:port".
    pub mgmd_addr: String,
    /// Ask for this node id; `None` = the first free data node id.
    pub node_id: Option<u16>,
}

fn fail(code: ErrorCode, detail: String) -> ShoalError {
    ShoalError::with_detail(code, detail)
}

/// Runs a data node until SIGINT/SIGTERM or mgmd's shutdown request.
pub fn run_datanode(opts: DataNodeOptions) -> Result<(), ShoalError> {
    let io_err = |what: &str, e: std::io::Error| fail(ErrorCode::Internal, format!("{what}: {e}"));
    let mut poll = Poll::new().map_err(|e| io_err("creating epoll", e))?;
    stop_signal::install().map_err(|e| io_err("installing SIGINT/SIGTERM handlers", e))?;
    let waker =
        Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| io_err("creating waker", e))?);
    let link = mgm_link::start(&opts.mgmd_addr, opts.node_id, waker)?;
    let reg = &link.registration;
    let cfg = reg.config.clone();
    let addr: SocketAddr = (cfg.host.as_str(), cfg.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            fail(
                ErrorCode::Internal,
                format!("cannot resolve data node host {:?}", cfg.host),
            )
        })?;
    let mut listener = TcpListener::bind(addr).map_err(|e| {
        fail(
            ErrorCode::Internal,
            format!("cannot listen on {addr} (is the port taken by another process?): {e}"),
        )
    })?;
    let port = listener
        .local_addr()
        .map_err(|e| io_err("local_addr", e))?
        .port();
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
        .map_err(|e| io_err("registering listener", e))?;

    let mut node = DataNode::new(KernelConfig {
        node_id: reg.node_id,
        report_commit_points: false,
        data_memory_bytes: cfg.data_memory_bytes as usize,
        max_concurrent_transactions: cfg.max_concurrent_transactions as usize,
        max_concurrent_operations: cfg.max_concurrent_operations as usize,
        max_operations_per_transaction: cfg.max_operations_per_transaction as usize,
        deadlock_timeout_ms: cfg.deadlock_timeout_ms,
        transaction_inactive_timeout_ms: cfg.transaction_inactive_timeout_ms,
    });
    for t in &reg.tables {
        node.create_table(t);
    }
    let mut el = EventLoop {
        node,
        conns: HashMap::new(),
        next_conn: FIRST_CONN,
        outputs: Vec::new(),
        signals: Vec::new(),
        dirty: Vec::new(),
        start: Instant::now(),
        node_id: reg.node_id,
        cluster_id: reg.cluster_id,
        max_frame_bytes: cfg.max_frame_bytes as usize,
        max_signals: cfg.max_signals_per_frame as usize,
        max_conns: cfg.max_client_connections as usize,
        port,
        peers: cfg
            .cluster_data_nodes
            .iter()
            .filter(|&&n| n != reg.node_id)
            .map(|&n| (n, Peer::default()))
            .collect(),
    };
    let _ = link
        .requests
        .send(LinkRequest::Status(el.status(el.state())));
    tracing::info!(
        "data node {} started, listening on {}:{port}",
        reg.node_id,
        cfg.host
    );
    eprintln!("data node {} listening on {}:{port}", reg.node_id, cfg.host);

    let mut events = Events::with_capacity(1024);
    // Like NDB's spinning: after work, poll without sleeping for a while,
    // so the next request is seen without a wake-up (tens of µs here).
    let spin = Duration::from_micros(u64::from(cfg.spin_us));
    let mut spin_until: Option<Instant> = None;
    let mut next_tick = TICK_MS;
    let mut next_status = STATUS_EVERY_MS;
    let mut reported = el.state();
    loop {
        if let Some(signal) = stop_signal::received() {
            tracing::info!("data node {} stopping: {signal}", el.node_id);
            eprintln!("data node {} stopping: {signal}", el.node_id);
            return Ok(());
        }
        let now = el.now_ms();
        let timeout = if spin_until.is_some_and(|t| Instant::now() < t) {
            Duration::ZERO
        } else {
            Duration::from_millis(next_tick.saturating_sub(now).max(1))
        };
        if let Err(e) = poll.poll(&mut events, Some(timeout)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(io_err("epoll_wait", e));
            }
        }
        if !events.is_empty() && !spin.is_zero() {
            spin_until = Some(Instant::now() + spin);
        }
        for event in events.iter() {
            match event.token() {
                LISTENER => el.accept(&mut listener, &poll),
                WAKER => {
                    while let Ok(ev) = link.events.try_recv() {
                        match ev {
                            LinkEvent::Schema { event_id, event } => {
                                let now = el.now_ms();
                                match event {
                                    MgmEvent::TableCreated(def) => el.node.create_table(&def),
                                    MgmEvent::TableDropped { id } => {
                                        el.node.drop_table(now, id, &mut el.outputs)
                                    }
                                    MgmEvent::Shutdown => {}
                                }
                                let _ = link.requests.send(LinkRequest::Ack {
                                    event_id,
                                    result: Ok(()),
                                });
                            }
                            LinkEvent::Shutdown(why) => {
                                tracing::info!("data node {} stopping: {why}", el.node_id);
                                eprintln!("data node {} stopping: {why}", el.node_id);
                                return Ok(());
                            }
                            LinkEvent::MgmdLost(why) => {
                                tracing::warn!("lost mgmd ({why}); still serving clients");
                            }
                            LinkEvent::Peers(list) => el.set_peer_addrs(list),
                        }
                    }
                }
                Token(t) => {
                    let conn = t as ConnId;
                    if event.is_readable() || event.is_read_closed() || event.is_error() {
                        el.on_readable(conn, &poll);
                    }
                    if event.is_writable() {
                        if let Some(c) = el.conns.get_mut(&conn) {
                            c.dirty = true;
                            el.dirty.push(conn);
                        }
                    }
                }
            }
        }
        let now = el.now_ms();
        if now >= next_tick {
            el.node.tick(now, &mut el.outputs);
            el.connect_peers(&poll);
            next_tick = now + TICK_MS;
        }
        let state = el.state();
        if now >= next_status || state != reported {
            let _ = link.requests.send(LinkRequest::Status(el.status(state)));
            if state != reported && state == NodeState::Started {
                tracing::info!("data node {} linked to every other data node", el.node_id);
            }
            reported = state;
            next_status = now + STATUS_EVERY_MS;
        }
        el.dispatch_outputs();
        el.flush_dirty(&poll);
    }
}

struct EventLoop {
    node: DataNode,
    conns: HashMap<ConnId, Conn>,
    next_conn: ConnId,
    outputs: Vec<Output>,
    signals: Vec<Signal>,
    dirty: Vec<ConnId>,
    start: Instant,
    node_id: u16,
    cluster_id: u64,
    max_frame_bytes: usize,
    max_signals: usize,
    max_conns: usize,
    port: u16,
    /// The other data nodes of the cluster.
    peers: BTreeMap<u16, Peer>,
}

#[derive(Default)]
struct Peer {
    addr: Option<SocketAddr>,
    /// The link, once its handshake is done.
    conn: Option<ConnId>,
    /// A connection we opened whose handshake is not done yet.
    connecting: Option<ConnId>,
    next_attempt_ms: u64,
    /// Signals for the node while no link is up, in order.
    pending: Vec<BlockSignal>,
}

impl EventLoop {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    /// `Started` once linked to every other data node.
    fn state(&self) -> NodeState {
        if self.peers.values().all(|p| p.conn.is_some()) {
            NodeState::Started
        } else {
            NodeState::Starting
        }
    }

    fn set_peer_addrs(&mut self, list: Vec<(u16, String, u16)>) {
        for (id, host, port) in list {
            let Some(peer) = self.peers.get_mut(&id) else {
                continue;
            };
            match (host.as_str(), port)
                .to_socket_addrs()
                .map(|mut a| a.next())
            {
                Ok(Some(addr)) => peer.addr = Some(addr),
                _ => tracing::warn!("cannot resolve data node {id} at {host}:{port}"),
            }
        }
    }

    /// Opens links to the data nodes with higher ids that have none.
    fn connect_peers(&mut self, poll: &Poll) {
        let now = self.now_ms();
        let me = self.node_id;
        let due: Vec<(u16, SocketAddr)> = self
            .peers
            .iter()
            .filter(|(&id, p)| {
                id > me && p.conn.is_none() && p.connecting.is_none() && now >= p.next_attempt_ms
            })
            .filter_map(|(&id, p)| p.addr.map(|a| (id, a)))
            .collect();
        for (id, addr) in due {
            self.peers.get_mut(&id).expect("listed").next_attempt_ms = now + PEER_RETRY_MS;
            let mut stream = match mio::net::TcpStream::connect(addr) {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!("connecting to data node {id} at {addr}: {e}");
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let conn_id = self.next_conn;
            self.next_conn += 1;
            if let Err(e) = poll.registry().register(
                &mut stream,
                Token(conn_id as usize),
                Interest::READABLE | Interest::WRITABLE,
            ) {
                tracing::warn!("cannot register the link to data node {id}: {e}");
                continue;
            }
            let mut conn = Conn::new(stream, addr, self.max_frame_bytes, self.max_signals);
            conn.phase = Phase::AwaitReply;
            conn.role = Role::Peer(id);
            let hello = Hello {
                protocol_version: shoal_wire::PROTOCOL_VERSION,
                node_type: NodeType::DataNode,
                cluster_id: self.cluster_id,
                node_id: me,
                target_node_id: id,
            };
            conn.push_raw(&hello.encode());
            self.conns.insert(conn_id, conn);
            self.dirty.push(conn_id);
            self.peers.get_mut(&id).expect("listed").connecting = Some(conn_id);
        }
    }

    /// The link to data node `id` is up: send what waited for it.
    fn peer_linked(&mut self, id: u16, conn_id: ConnId) {
        let peer = self.peers.get_mut(&id).expect("a configured peer");
        peer.conn = Some(conn_id);
        peer.connecting = None;
        let pending = std::mem::take(&mut peer.pending);
        tracing::info!(
            "linked to data node {id} ({} signal(s) were waiting)",
            pending.len()
        );
        let conn = self.conns.get_mut(&conn_id).expect("present");
        for signal in pending {
            conn.push_signal(&Signal::Node(signal));
        }
        self.dirty.push(conn_id);
    }

    /// Whether a Hello from data node `from` may open a link.
    fn accept_peer(&self, from: u16) -> Result<(), String> {
        match self.peers.get(&from) {
            None => Err(format!(
                "node {from} is not another data node of this cluster"
            )),
            Some(_) if from > self.node_id => Err(format!(
                "data node {from} must wait for node {} to connect (the lower id connects)",
                self.node_id
            )),
            Some(p) if p.conn.is_some() => Err(format!("data node {from} is already linked")),
            Some(_) => Ok(()),
        }
    }

    fn status(&self, state: NodeState) -> NodeStatus {
        let s = self.node.stats();
        NodeStatus {
            state,
            data_memory_used_bytes: s.data_memory_used_bytes,
            data_memory_total_bytes: s.data_memory_total_bytes,
            rows: s.rows,
            client_connections: self
                .conns
                .values()
                .filter(|c| c.role == Role::Client)
                .count() as u32,
            listen_port: self.port,
            start_phase: None,
        }
    }

    fn accept(&mut self, listener: &mut TcpListener, poll: &Poll) {
        loop {
            match listener.accept() {
                Ok((mut stream, peer)) => {
                    if self.conns.len() >= self.max_conns {
                        tracing::warn!(
                            "refusing {peer}: max_client_connections={} reached",
                            self.max_conns
                        );
                        continue; // dropping the stream closes it
                    }
                    let _ = stream.set_nodelay(true);
                    let id = self.next_conn;
                    self.next_conn += 1;
                    if let Err(e) = poll.registry().register(
                        &mut stream,
                        Token(id as usize),
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        tracing::warn!("cannot register {peer}: {e}");
                        continue;
                    }
                    self.conns.insert(
                        id,
                        Conn::new(stream, peer, self.max_frame_bytes, self.max_signals),
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    // Out of file descriptors and the like: keep serving the others.
                    tracing::warn!("accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn on_readable(&mut self, id: ConnId, poll: &Poll) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let outcome = conn.read_available();
        if let Err(why) = self.process_input(id) {
            return self.close(id, poll, &why, true);
        }
        if let ReadOutcome::Closed(why) = outcome {
            self.close(id, poll, &why, false);
        }
    }

    /// Handles whatever whole messages the connection has buffered.
    /// An error is a protocol violation: the caller closes the connection.
    fn process_input(&mut self, id: ConnId) -> Result<(), String> {
        let now = self.now_ms();
        let conn = self.conns.get_mut(&id).expect("present");
        match conn.phase {
            Phase::Handshake => {
                if conn.input().len() < HELLO_BYTES {
                    return Ok(());
                }
                let hello = Hello::decode(&conn.input()[..HELLO_BYTES]);
                conn.consume(HELLO_BYTES);
                let verdict = match &hello {
                    Ok(h) if !h.is_compatible(self.cluster_id, self.node_id) => Err(format!(
                        "expected protocol version {}, cluster id {}, node id {}; got version {}, cluster id {}, node id {}",
                        shoal_wire::PROTOCOL_VERSION, self.cluster_id, self.node_id,
                        h.protocol_version, h.cluster_id, h.target_node_id
                    )),
                    Ok(h) if h.node_type == NodeType::DataNode => {
                        self.accept_peer(h.node_id).map(|()| Role::Peer(h.node_id))
                    }
                    Ok(_) => Ok(Role::Client),
                    Err(e) => Err(format!("bad hello: {e}")),
                };
                let reply = match &verdict {
                    Ok(_) => HelloReply::accepted(
                        self.node_id,
                        self.max_frame_bytes as u32,
                        self.max_signals as u32,
                    ),
                    Err(why) => HelloReply::rejected(
                        self.node_id,
                        ErrorCode::HandshakeRejected as u16,
                        why.clone(),
                    ),
                };
                let mut bytes = Vec::new();
                reply.encode(&mut bytes);
                let conn = self.conns.get_mut(&id).expect("present");
                conn.push_raw(&bytes);
                self.dirty.push(id);
                let role = verdict.map_err(|why| format!("handshake rejected: {why}"))?;
                conn.phase = Phase::Open;
                conn.role = role;
                if let Role::Peer(peer) = role {
                    self.peer_linked(peer, id);
                }
            }
            Phase::AwaitReply => {
                let Role::Peer(peer) = conn.role else {
                    unreachable!("only links to data nodes wait for a reply");
                };
                let (reply, used) = match HelloReply::decode(conn.input()) {
                    Ok(Some(r)) => r,
                    Ok(None) => return Ok(()),
                    Err(e) => {
                        return Err(format!("bad handshake reply from data node {peer}: {e}"))
                    }
                };
                conn.consume(used);
                if reply.status != 0 || reply.node_id != peer {
                    return Err(format!(
                        "data node {peer} refused the link (status {}, node {}): {}",
                        reply.status, reply.node_id, reply.detail
                    ));
                }
                conn.phase = Phase::Open;
                self.peer_linked(peer, id);
            }
            Phase::Open => {}
        }
        loop {
            let conn = self.conns.get_mut(&id).expect("present");
            let role = conn.role;
            match conn.decode_frame(&mut self.signals) {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(e) => {
                    conn.push_signal(&Signal::ErrorReport(e.to_error_report()));
                    self.dirty.push(id);
                    return Err(e.to_string());
                }
            }
            let mut signals = std::mem::take(&mut self.signals);
            for signal in signals.drain(..) {
                if self.outputs.len() >= EARLY_SEND_OUTPUTS {
                    self.send_to_peers_early();
                }
                let result = match (role, signal) {
                    (Role::Peer(from), Signal::Node(sig)) => {
                        if sig.destination() != self.node_id {
                            Err(ShoalError::with_detail(
                                ErrorCode::ProtocolViolation,
                                format!(
                                    "data node {from} sent {} meant for node {}",
                                    sig.gsn(),
                                    sig.destination()
                                ),
                            ))
                        } else {
                            self.node.node_signal(now, sig, &mut self.outputs);
                            Ok(())
                        }
                    }
                    (Role::Peer(from), other) => Err(ShoalError::with_detail(
                        ErrorCode::ProtocolViolation,
                        format!("data node {from} sent a {} on a node link", other.name()),
                    )),
                    (Role::Client, signal) => {
                        self.node.client_signal(now, id, signal, &mut self.outputs)
                    }
                };
                if let Err(e) = result {
                    let conn = self.conns.get_mut(&id).expect("present");
                    conn.push_signal(&Signal::ErrorReport(ErrorReport {
                        code: e.code as u16,
                        detail: e.detail.clone(),
                    }));
                    self.dirty.push(id);
                    return Err(e.to_string());
                }
            }
            self.signals = signals;
        }
    }

    /// Sends what the kernel produced so far before the input is all
    /// handled, so the other data nodes start on it while this one goes
    /// on (a big batch would otherwise go back and forth whole, each node
    /// idle while the other works). Client answers wait for the loop's end.
    fn send_to_peers_early(&mut self) {
        self.dispatch_outputs();
        for &id in &self.dirty {
            if let Some(c) = self.conns.get_mut(&id) {
                if matches!(c.role, Role::Peer(_)) && c.dirty {
                    // A failed link is found and closed by the loop's flush.
                    let _ = c.flush();
                }
            }
        }
    }

    fn dispatch_outputs(&mut self) {
        for out in self.outputs.drain(..) {
            let (conn, signal) = match out {
                Output::Send { conn, signal } => (conn, signal),
                Output::CommitPoint { .. } | Output::CommitDone { .. } => continue,
                Output::ToNode { node, signal } => {
                    let Some(peer) = self.peers.get_mut(&node) else {
                        tracing::error!("signal for unknown data node {node} dropped: {signal:?}");
                        continue;
                    };
                    match peer.conn {
                        Some(conn) => (conn, Signal::Node(signal)),
                        None if peer.pending.len() < PEER_PENDING_MAX => {
                            peer.pending.push(signal);
                            continue;
                        }
                        None => {
                            tracing::error!("data node {node} unreachable; dropping {signal:?}");
                            continue;
                        }
                    }
                }
            };
            if let Some(c) = self.conns.get_mut(&conn) {
                // Listed once per flush, not once per signal.
                if !c.dirty {
                    self.dirty.push(conn);
                }
                c.push_signal(&signal);
            }
        }
    }

    fn flush_dirty(&mut self, poll: &Poll) {
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for id in dirty.drain(..) {
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            if let Err(why) = c.flush() {
                self.close(id, poll, &why, false);
                continue;
            }
            // Only clients are cut off for not reading; a data node link
            // is never dropped for being slow (its peer's transactions
            // would be lost).
            if c.role == Role::Client && c.backlog_bytes() > OUTPUT_BACKLOG_MAX_BYTES {
                let why = format!(
                    "client is not reading: {} bytes of answers unsent",
                    c.backlog_bytes()
                );
                self.close(id, poll, &why, false);
            }
        }
        self.dirty = dirty;
    }

    /// Closes one connection; a client's open transactions are aborted.
    /// With `flush_first`, a final error report is written if the socket
    /// takes it.
    fn close(&mut self, id: ConnId, poll: &Poll, why: &str, flush_first: bool) {
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        if flush_first {
            let _ = c.flush();
        }
        let _ = poll.registry().deregister(&mut c.stream);
        let _ = c.stream.shutdown(std::net::Shutdown::Both);
        if let Role::Peer(peer) = c.role {
            let p = self.peers.get_mut(&peer).expect("a configured peer");
            if p.conn == Some(id) {
                // Transactions waiting on this node stay stuck until node
                // failure handling (the next roadmap step) takes over.
                tracing::error!("lost the link to data node {peer}: {why}");
                eprintln!(
                    "data node {}: lost the link to data node {peer}: {why}",
                    self.node_id
                );
                p.conn = None;
                self.node.peer_link_lost(peer);
            } else {
                tracing::debug!("link attempt to data node {peer} failed: {why}");
            }
            if p.connecting == Some(id) {
                p.connecting = None;
            }
            return;
        }
        tracing::info!("closing client {} ({}): {why}", id, c.peer);
        if flush_first {
            eprintln!(
                "data node {}: closed client {}: {why}",
                self.node_id, c.peer
            );
        }
        let now = self.now_ms();
        self.node.client_disconnected(now, id, &mut self.outputs);
    }
}
