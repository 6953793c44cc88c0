//! The data node's event loop: accepts clients, runs the handshake, feeds
//! decoded signals to the kernel, writes the kernel's answers in batches
//! (one write per connection per loop turn), ticks the kernel's timers and
//! reports status to mgmd.

use crate::conn::{Conn, Phase, ReadOutcome, OUTPUT_BACKLOG_MAX_BYTES};
use crate::mgm_link::{self, LinkEvent, LinkRequest};
use crate::stop_signal;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use shoal_kernel::{ConnId, DataNode, KernelConfig, Output};
use shoal_mgmd::{MgmEvent, NodeState, NodeStatus};
use shoal_types::{ErrorCode, ShoalError};
use shoal_wire::{ErrorReport, Hello, HelloReply, Signal, HELLO_BYTES};
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONN: u64 = 2;
const TICK_MS: u64 = 10;
const STATUS_EVERY_MS: u64 = 1000;

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
    if cfg.cluster_data_nodes.len() > 1 {
        // The blocks run the multi-node protocol (see the simulator), but
        // this runtime has no node-to-node transport yet.
        return Err(fail(
            ErrorCode::NodeIdRefused,
            format!(
                "the cluster config has {} data nodes; this build of the data node runs clusters \
                 of one data node (node-to-node transport is not built yet). Use --data-nodes 1.",
                cfg.cluster_data_nodes.len()
            ),
        ));
    }
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
    };
    let _ = link
        .requests
        .send(LinkRequest::Status(el.status(NodeState::Started)));
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
            next_tick = now + TICK_MS;
        }
        if now >= next_status {
            let _ = link
                .requests
                .send(LinkRequest::Status(el.status(NodeState::Started)));
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
}

impl EventLoop {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn status(&self, state: NodeState) -> NodeStatus {
        let s = self.node.stats();
        NodeStatus {
            state,
            data_memory_used_bytes: s.data_memory_used_bytes,
            data_memory_total_bytes: s.data_memory_total_bytes,
            rows: s.rows,
            client_connections: self.conns.len() as u32,
            listen_port: self.port,
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
        if conn.phase == Phase::Handshake {
            if conn.input().len() < HELLO_BYTES {
                return Ok(());
            }
            let hello = Hello::decode(&conn.input()[..HELLO_BYTES]);
            conn.consume(HELLO_BYTES);
            let reply = match &hello {
                Ok(h) if h.is_compatible(self.cluster_id, self.node_id) => {
                    HelloReply::accepted(self.node_id, self.max_frame_bytes as u32, self.max_signals as u32)
                }
                Ok(h) => HelloReply::rejected(
                    self.node_id,
                    ErrorCode::HandshakeRejected as u16,
                    format!(
                        "expected protocol version {}, cluster id {}, node id {}; got version {}, cluster id {}, node id {}",
                        shoal_wire::PROTOCOL_VERSION, self.cluster_id, self.node_id,
                        h.protocol_version, h.cluster_id, h.target_node_id
                    ),
                ),
                Err(e) => HelloReply::rejected(self.node_id, ErrorCode::HandshakeRejected as u16, format!("bad hello: {e}")),
            };
            let mut bytes = Vec::new();
            reply.encode(&mut bytes);
            conn.push_raw(&bytes);
            self.dirty.push(id);
            if reply.status != 0 {
                return Err(format!("handshake rejected: {}", reply.detail));
            }
            conn.phase = Phase::Open;
        }
        loop {
            let conn = self.conns.get_mut(&id).expect("present");
            match conn.decode_frame(&mut self.signals) {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(e) => {
                    conn.push_signal(&Signal::ErrorReport(e.to_error_report()));
                    self.dirty.push(id);
                    return Err(e.to_string());
                }
            }
            for signal in self.signals.drain(..) {
                if let Err(e) = self.node.client_signal(now, id, signal, &mut self.outputs) {
                    let conn = self.conns.get_mut(&id).expect("present");
                    conn.push_signal(&Signal::ErrorReport(ErrorReport {
                        code: e.code as u16,
                        detail: e.detail.clone(),
                    }));
                    self.dirty.push(id);
                    return Err(e.to_string());
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
                    // Refused at start: a one-node cluster has no peers.
                    tracing::error!(
                        "dropping a signal for data node {node}: no transport: {signal:?}"
                    );
                    continue;
                }
            };
            if let Some(c) = self.conns.get_mut(&conn) {
                c.push_signal(&signal);
                if !c.dirty {
                    c.dirty = true;
                }
                self.dirty.push(conn);
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
            if c.backlog_bytes() > OUTPUT_BACKLOG_MAX_BYTES {
                let why = format!(
                    "client is not reading: {} bytes of answers unsent",
                    c.backlog_bytes()
                );
                self.close(id, poll, &why, false);
            }
        }
        self.dirty = dirty;
    }

    /// Closes one connection; its open transactions are aborted. With
    /// `flush_first`, a final error report is written if the socket takes it.
    fn close(&mut self, id: ConnId, poll: &Poll, why: &str, flush_first: bool) {
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        if flush_first {
            let _ = c.flush();
        }
        tracing::info!("closing client {} ({}): {why}", id, c.peer);
        if flush_first {
            eprintln!(
                "data node {}: closed client {}: {why}",
                self.node_id, c.peer
            );
        }
        let _ = poll.registry().deregister(&mut c.stream);
        let _ = c.stream.shutdown(std::net::Shutdown::Both);
        let now = self.now_ms();
        self.node.client_disconnected(now, id, &mut self.outputs);
    }
}
