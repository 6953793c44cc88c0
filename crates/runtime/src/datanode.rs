//! The data node process: registers with mgmd, builds the kernel from the
//! config mgmd serves, listens, and runs the event loop until it is told
//! to stop (SIGINT/SIGTERM, mgmd) or the cluster stops it (declared
//! failed, its side of a split may not survive).
//!
//! Membership (who is in the cluster, who is started) is the kernel's:
//! this file reports what the kernel says to mgmd.

use crate::event_loop::{EventLoop, Limits, TICK_MS};
use crate::mgm_link::{self, LinkEvent, LinkRequest};
use crate::node_files;
use crate::stop_signal;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use shoal_kernel::lqh::RestoreError;
use shoal_kernel::{DataNode, KernelConfig, NodeRole};
use shoal_mgmd::{DataNodeConfig, MgmEvent, NodeState, NodeStatus, StartPhase};
use shoal_types::{ErrorCode, ShoalError, TableDef};
use shoal_wire::{FRAME_HEADER_BYTES, SIGNAL_HEADER_BYTES};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) const LISTENER: Token = Token(0);
pub(crate) const WAKER: Token = Token(1);
const STATUS_EVERY_MS: u64 = 1000;
/// A clean stop waits at most this long (or four epochs) for what was
/// committed before it to be durable.
const CLEAN_STOP_WAIT_MS: u64 = 2000;

pub struct DataNodeOptions {
    /// mgmd's "host:port".
    pub mgmd_addr: String,
    /// Ask for this node id; `None` = the first free data node id.
    pub node_id: Option<u16>,
    /// Delete the node's redo log and sysfile first: it starts empty.
    pub initial: bool,
}

fn fail(code: ErrorCode, detail: String) -> ShoalError {
    ShoalError::with_detail(code, detail)
}

/// The kernel's settings from the config mgmd served.
fn kernel_config(node_id: u16, incarnation: u32, cfg: &DataNodeConfig) -> KernelConfig {
    // An answer must fit one frame to the client: headers and the
    // answer's own fixed fields come off the frame limit.
    let max_answer_bytes = (cfg.max_frame_bytes as usize)
        .saturating_sub(FRAME_HEADER_BYTES + SIGNAL_HEADER_BYTES + 64);
    KernelConfig {
        node_id,
        incarnation,
        data_nodes: cfg.cluster_data_nodes.clone(),
        node_groups: cfg.node_groups.clone(),
        data_memory_bytes: cfg.data_memory_bytes as usize,
        max_concurrent_transactions: cfg.max_concurrent_transactions as usize,
        max_concurrent_operations: cfg.max_concurrent_operations as usize,
        max_operations_per_transaction: cfg.max_operations_per_transaction as usize,
        deadlock_timeout_ms: cfg.deadlock_timeout_ms,
        transaction_inactive_timeout_ms: cfg.transaction_inactive_timeout_ms,
        heartbeat_interval_ms: cfg.heartbeat_interval_ms,
        arbitration_timeout_ms: cfg.arbitration_timeout_ms,
        start_partial_timeout_ms: cfg.start_partial_timeout_ms,
        copy_bytes_per_sec: cfg.restart_copy_bytes_per_sec,
        max_answer_bytes,
        copy_batch_rows: 512,
        snapshot_step_bytes: 4 << 20,
        index_build_rows_per_tick: cfg.index_build_rows_per_tick as usize,
        max_concurrent_scans: cfg.max_concurrent_scans as usize,
        scan_examine_rows_max: 16_384,
        epoch_interval_ms: if cfg.diskless {
            0
        } else {
            cfg.epoch_interval_ms
        },
        redo_write_bytes: 256 << 10,
        redo_log_bytes: cfg.redo_log_bytes,
        lcp_bytes_per_sec: cfg.checkpoint_bytes_per_sec,
        lcp_recovery_work_pct: cfg.checkpoint_recovery_work_pct,
        hash_seed: random_seed(),
        report_commit_points: false,
        faults: Default::default(),
    }
}

/// A seed nobody outside this process knows (std's per-process random
/// hash keys), for the kernel's hash maps.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(u64::from(std::process::id()));
    h.finish()
}

/// A table definition from mgmd, checked before the kernel takes it (the
/// kernel's blocks rely on a valid definition and distribution).
fn check_table(def: &TableDef, data_nodes: &[u16]) -> Result<(), ShoalError> {
    let refuse = |why: String| {
        fail(
            ErrorCode::BadRequest,
            format!(
                "mgmd sent an invalid definition of table {:?} (id {}): {why}",
                def.name, def.id
            ),
        )
    };
    def.validate().map_err(|e| refuse(e.to_string()))?;
    if let Some(spec) = &def.distribution {
        let map = spec.map().map_err(|e| refuse(e.to_string()))?;
        for f in &map.fragments {
            if let Some(n) = f.replicas.iter().find(|n| !data_nodes.contains(n)) {
                return Err(refuse(format!(
                    "a fragment is placed on data node {n}, which is not in the cluster"
                )));
            }
        }
    }
    Ok(())
}

/// Reads the node's files back and brings its rows to the durable epoch
/// they recorded (later epochs wait for the cluster's restart epoch), then
/// starts the log writer where the log ended. `fresh` builds the node
/// again (tables created, no rows): a checkpoint found damaged while its
/// rows were applied leaves them behind.
#[allow(clippy::too_many_arguments)]
fn restore_files(
    node: &mut DataNode,
    fresh: &dyn Fn() -> DataNode,
    dir: &std::path::Path,
    node_id: u16,
    initial: bool,
    waker: &Arc<Waker>,
    status: &tokio::sync::mpsc::UnboundedSender<LinkRequest>,
    port: u16,
) -> Result<(shoal_mgmd::dir_lock::DirLock, node_files::Writer), ShoalError> {
    let started = Instant::now();
    let (lock, mut recovered) = node_files::open(dir, node_id, initial)?;
    let read_secs = started.elapsed().as_secs_f64();
    if recovered.lcp_bytes + recovered.log_bytes > 0 {
        eprintln!(
            "data node {node_id}: restoring from {}: checkpoints {}..={} ({:.1} MB), then {} log records ({:.1} MB) from byte {}; durable epoch {}",
            dir.display(),
            recovered.lcp.first,
            recovered.lcp.last,
            recovered.lcp_bytes as f64 / 1e6,
            recovered.entries.len(),
            recovered.log_bytes as f64 / 1e6,
            recovered.redo_start,
            recovered.durable
        );
    }
    // How far it got, for the log and for `shoal mgm -e show`: a line per
    // 256 MB read.
    let mut next_line = 0u64;
    let mut progress = |done: u64, total: u64| {
        if total < 1 << 28 || done < next_line {
            return;
        }
        next_line = done + (1 << 28);
        eprintln!(
            "data node {node_id}: restoring: {:.2} of {:.2} GB of its files read and applied (checkpoints, then the log)",
            done as f64 / 1e9,
            total as f64 / 1e9
        );
        let _ = status.send(LinkRequest::Status(NodeStatus {
            state: NodeState::Starting,
            data_memory_used_bytes: 0,
            data_memory_total_bytes: 0,
            rows: 0,
            client_connections: 0,
            listen_port: port,
            start_phase: Some(StartPhase {
                what: "restoring its rows from its checkpoints and redo log (bytes)".into(),
                done,
                total,
            }),
            // Its own files, before it joins any cluster.
            in_cluster: false,
        }));
    };
    let mut reader = node_files::LcpReader::start(recovered.lcp_files.clone());
    let restored = node.restore_local(
        &mut shoal_kernel::LocalFiles {
            lcp: recovered.lcp,
            lcp_pieces: &mut || reader.next(),
            lcp_bytes: recovered.lcp_bytes,
            log_bytes: recovered.log_bytes,
            redo_start: recovered.redo_start,
            entries: &recovered.entries,
            log_end: recovered.log_end,
            durable: recovered.durable,
            history: recovered.sysfile.map_or(0, |s| s.history),
        },
        &mut progress,
    );
    drop(reader);
    let cannot_restore = |why: String| {
        fail(
            ErrorCode::OutOfDataMemory,
            format!(
                "data node {node_id} cannot restore its rows from {}: {why}",
                dir.display()
            ),
        )
    };
    let stats = match restored {
        Ok(stats) => stats,
        Err(RestoreError::Failed(why)) => return Err(cannot_restore(why)),
        Err(RestoreError::FilesDamaged(why)) => {
            // Rows from the files before the damage were applied: they go
            // with the node, which starts again from nothing.
            recovered = node_files::damaged_while_restoring(dir, node_id, &why, &recovered)?;
            *node = fresh();
            node.restore_local(
                &mut shoal_kernel::LocalFiles {
                    lcp: recovered.lcp,
                    lcp_pieces: &mut || Ok(None),
                    lcp_bytes: 0,
                    log_bytes: 0,
                    redo_start: recovered.redo_start,
                    entries: &recovered.entries,
                    log_end: recovered.log_end,
                    durable: recovered.durable,
                    history: recovered.sysfile.map_or(0, |s| s.history),
                },
                &mut |_, _| {},
            )
            .map_err(|e| cannot_restore(e.to_string()))?
        }
    };
    if recovered.lcp_bytes + recovered.log_bytes > 0 {
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "data node {node_id}: restored {} row changes in {secs:.2} s ({:.0} changes/s, {:.0} MB/s of files; {read_secs:.2} s reading and checking the log, {:.2} s reading the checkpoints and applying both; {} records not applied: superseded by a newer checkpoint, voided, or of fragments not held here); {} of later epochs wait for the cluster's restart epoch; its files hold epochs {}..={} whole",
            stats.applied,
            stats.applied as f64 / secs.max(1e-6),
            (recovered.lcp_bytes + recovered.log_bytes) as f64 / 1e6 / secs.max(1e-6),
            secs - read_secs,
            stats.skipped,
            stats.tail,
            stats.restorable_from,
            stats.restorable
        );
    }
    let writer = node_files::Writer::start(dir, node_id, &recovered, waker.clone())?;
    Ok((lock, writer))
}

/// What mgmd shows for the node's role.
fn status_of(role: NodeRole) -> (NodeState, Option<StartPhase>) {
    match role {
        NodeRole::Joining | NodeRole::Stopped => (
            NodeState::Starting,
            Some(StartPhase {
                what: "joining the cluster".into(),
                done: 0,
                total: 0,
            }),
        ),
        NodeRole::Starting { done, total } => (
            NodeState::Starting,
            Some(StartPhase {
                what: "copying fragments".into(),
                done,
                total,
            }),
        ),
        NodeRole::Restoring => (
            NodeState::Starting,
            Some(StartPhase {
                what: "restoring its rows to the cluster's restart epoch".into(),
                done: 0,
                total: 0,
            }),
        ),
        NodeRole::Started => (NodeState::Started, None),
    }
}

/// Runs a data node until SIGINT/SIGTERM or mgmd's shutdown request
/// (`Ok`), or until the cluster stops it (`Err` with code 5006: it must
/// restart to rejoin).
pub fn run_datanode(opts: DataNodeOptions) -> Result<(), ShoalError> {
    let io_err = |what: &str, e: std::io::Error| fail(ErrorCode::Internal, format!("{what}: {e}"));
    let mut poll = Poll::new().map_err(|e| io_err("creating epoll", e))?;
    stop_signal::install().map_err(|e| io_err("installing SIGINT/SIGTERM handlers", e))?;
    let waker =
        Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| io_err("creating waker", e))?);
    let link = mgm_link::start(&opts.mgmd_addr, opts.node_id, waker.clone())?;
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

    let start = Instant::now();
    for t in &reg.tables {
        check_table(t, &cfg.cluster_data_nodes)?;
    }
    let fresh = || {
        let mut node = DataNode::new(kernel_config(reg.node_id, reg.incarnation, &cfg), 0);
        for t in &reg.tables {
            node.create_table(t);
        }
        node
    };
    let mut node = fresh();
    // The data dir stays locked for as long as the process runs.
    let (_dir_lock, files) = if cfg.diskless {
        (None, None)
    } else {
        let (lock, writer) = restore_files(
            &mut node,
            &fresh,
            &cfg.data_dir,
            reg.node_id,
            opts.initial,
            &waker,
            &link.requests,
            port,
        )?;
        (Some(lock), Some(writer))
    };
    let mut el = EventLoop::new(
        node,
        start,
        reg.cluster_id,
        port,
        Limits {
            max_frame_bytes: cfg.max_frame_bytes as usize,
            max_signals: cfg.max_signals_per_frame as usize,
            max_clients: cfg.max_client_connections as usize,
        },
        &cfg.cluster_data_nodes,
        link.requests.clone(),
    );
    el.files = files;
    let (node_id, incarnation) = (reg.node_id, reg.incarnation);
    tracing::info!(
        "data node {node_id} (start {incarnation}) listening on {}:{port}",
        cfg.host
    );
    eprintln!(
        "data node {node_id} (start {incarnation}) listening on {}:{port}",
        cfg.host
    );

    let files_kept = !cfg.diskless;
    // A clean stop in progress: the epoch to see durable first, and until when.
    let mut stopping: Option<(Option<u64>, u64)> = None;
    let mut events = Events::with_capacity(1024);
    // Like NDB's spinning: after work, poll without sleeping for a while,
    // so the next request is seen without a wake-up (tens of µs here).
    let spin = Duration::from_micros(u64::from(cfg.spin_us));
    let mut spin_until: Option<Instant> = None;
    let mut next_tick = TICK_MS;
    let mut next_status = 0;
    let mut reported: Option<(NodeState, Option<StartPhase>)> = None;
    loop {
        if let Some(signal) = stop_signal::received() {
            // A clean stop first waits (a little) until everything committed
            // before it is durable, so a stop of every node keeps every
            // acknowledged row; the node serves meanwhile.
            let now = el.now_ms();
            let drain = *stopping.get_or_insert_with(|| {
                let epoch = el.node.epoch_now();
                let target = (files_kept && epoch.restored && el.node.role() == NodeRole::Started)
                    .then_some(epoch.current);
                if let Some(e) = target {
                    eprintln!(
                        "data node {node_id} stopping ({signal}): waiting until epoch {e} is durable"
                    );
                }
                (target, now + CLEAN_STOP_WAIT_MS.max(4 * cfg.epoch_interval_ms))
            });
            let (target, deadline) = drain;
            let durable = target.is_none_or(|e| el.node.durable_epoch() >= e);
            if durable || now >= deadline {
                if !durable {
                    eprintln!(
                        "data node {node_id}: epoch {} not durable after {} ms; stopping anyway (durable: {})",
                        target.unwrap_or(0),
                        CLEAN_STOP_WAIT_MS.max(4 * cfg.epoch_interval_ms),
                        el.node.durable_epoch()
                    );
                }
                tracing::info!("data node {node_id} stopping: {signal}");
                eprintln!("data node {node_id} stopping: {signal}");
                el.flush_all(&poll);
                return Ok(());
            }
        }
        if let Some(reason) = el.stopped.take() {
            el.flush_all(&poll);
            let why = format!("data node {node_id} (start {incarnation}) stops: {reason}");
            tracing::error!("{why}");
            eprintln!("{why}");
            return Err(fail(ErrorCode::NodeDeclaredFailed, why));
        }
        let now = el.now_ms();
        let timeout = if spin_until.is_some_and(|t| Instant::now() < t) || el.has_unread_input() {
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
                    el.file_events();
                    while let Ok(ev) = link.events.try_recv() {
                        match ev {
                            LinkEvent::Schema { event_id, event } => {
                                let result =
                                    el.schema_event(event, &cfg.cluster_data_nodes, Some(event_id));
                                if let Err(e) = &result {
                                    tracing::error!("{e}");
                                }
                                // An index build acks when it is done.
                                if !matches!(result, Ok(true)) {
                                    let result = result.map(|_| ());
                                    let _ =
                                        link.requests.send(LinkRequest::Ack { event_id, result });
                                }
                            }
                            LinkEvent::Shutdown(why) => {
                                tracing::info!("data node {node_id} stopping: {why}");
                                eprintln!("data node {node_id} stopping: {why}");
                                el.flush_all(&poll);
                                return Ok(());
                            }
                            LinkEvent::MgmdLost(why) => {
                                tracing::warn!("lost mgmd ({why}); still serving clients");
                                eprintln!(
                                    "data node {node_id}: lost mgmd ({why}); still serving clients"
                                );
                            }
                            LinkEvent::Reattached { tables, dropped } => {
                                // Catch up on the schema changes made while
                                // the node was away; ids are never reused,
                                // so a gone id means a dropped table.
                                let mut created = 0;
                                for id in &dropped {
                                    let drop = MgmEvent::TableDropped { id: *id };
                                    let _ = el.schema_event(drop, &cfg.cluster_data_nodes, None);
                                }
                                for def in tables {
                                    if let Some(t) = el.node.dih().table(def.id) {
                                        // Indexes added or dropped meanwhile
                                        // (a unique one's table follows in
                                        // id order, before any client's
                                        // request is taken).
                                        let had = &t.layout.table;
                                        if had.indexes != def.indexes
                                            || had.unique_indexes != def.unique_indexes
                                        {
                                            let change = MgmEvent::IndexesChanged(def);
                                            if let Err(e) = el.schema_event(
                                                change,
                                                &cfg.cluster_data_nodes,
                                                None,
                                            ) {
                                                tracing::error!("{e}");
                                            }
                                        }
                                        continue;
                                    }
                                    let create = MgmEvent::TableCreated(def);
                                    match el.schema_event(create, &cfg.cluster_data_nodes, None) {
                                        Ok(_) => created += 1,
                                        Err(e) => {
                                            tracing::error!("{e}");
                                            eprintln!("data node {node_id}: {e}");
                                        }
                                    }
                                }
                                let dropped = dropped.len();
                                tracing::info!(
                                    "reattached to mgmd; tables created meanwhile: {created}, dropped: {dropped}"
                                );
                                eprintln!(
                                    "data node {node_id}: reattached to mgmd (start {incarnation}; \
                                     {created} table(s) created and {dropped} dropped meanwhile)"
                                );
                            }
                            LinkEvent::ReattachRefused(why) => {
                                tracing::error!("mgmd refuses to take the node back ({why}); still serving clients");
                                eprintln!(
                                    "data node {node_id}: mgmd refuses to take the node back ({why}); \
                                     still serving clients without mgmd"
                                );
                            }
                            LinkEvent::Peers(list) => el.set_peer_addrs(list),
                            LinkEvent::Arbitration { granted } => el.arbitration_result(granted),
                        }
                    }
                }
                token => el.on_event(token, event, &poll),
            }
        }
        el.read_unread(&poll);
        let now = el.now_ms();
        if now >= next_tick {
            el.tick(&poll);
            next_tick = now + TICK_MS;
        }
        let status = status_of(el.node.role());
        if now >= next_status || reported.as_ref() != Some(&status) {
            if status.0 == NodeState::Started
                && reported.as_ref().is_some_and(|r| r.0 != NodeState::Started)
            {
                tracing::info!("data node {node_id} started");
            }
            let _ = link
                .requests
                .send(LinkRequest::Status(el.status(status.0, status.1.clone())));
            reported = Some(status);
            next_status = now + STATUS_EVERY_MS;
        }
        el.dispatch_outputs(&poll);
        el.flush_dirty(&poll);
    }
}

impl EventLoop {
    /// Applies mgmd's schema change. `Ok(true)`: an index build is under
    /// way, and `event_id` (if any) is acked when it ends
    /// (`Output::IndexesBuilt`); otherwise ack now.
    fn schema_event(
        &mut self,
        event: MgmEvent,
        data_nodes: &[u16],
        event_id: Option<u64>,
    ) -> Result<bool, ShoalError> {
        let now = self.now_ms();
        match event {
            MgmEvent::TableCreated(def) => {
                check_table(&def, data_nodes)?;
                self.node.create_table(&def);
            }
            MgmEvent::TableDropped { id } => {
                self.node.drop_table(now, id, &mut self.outputs);
                // Index changes of it waiting for a build: nothing to
                // build any more.
                for event_id in self.index_acks.remove(&id).unwrap_or_default() {
                    let _ = self.mgm.send(crate::mgm_link::LinkRequest::Ack {
                        event_id,
                        result: Ok(()),
                    });
                }
            }
            MgmEvent::IndexesChanged(def) => {
                check_table(&def, data_nodes)?;
                if self.node.alter_indexes(&def)? {
                    if let Some(event_id) = event_id {
                        self.index_acks.entry(def.id).or_default().push(event_id);
                        return Ok(true);
                    }
                }
            }
            MgmEvent::Shutdown => {}
        }
        Ok(false)
    }
}
