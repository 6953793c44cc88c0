//! The data node's link to mgmd, on its own thread with a small tokio
//! runtime: registers the node, forwards schema events and mgmd's stop
//! requests to the event loop (waking it), asks the arbitrator on the
//! node's behalf, sends acks and status reports back, and reattaches to
//! mgmd when the session breaks.
//!
//! A node whose mgmd session breaks (mgmd restarted, or stopped answering)
//! keeps serving, as NDB data nodes do, and the link reattaches in the
//! background with backoff ([`REATTACH_BACKOFF_MIN`] doubling to
//! [`REATTACH_BACKOFF_MAX`]). Once back it sends the last status at once,
//! resumes peer polling and events, and hands the event loop mgmd's
//! current tables so it can catch up on what changed meanwhile.
//!
//! Invariants:
//! - The node's id and start (incarnation) never change while the process
//!   lives: a reattach asks mgmd for the same ones, and does not count as a
//!   start. mgmd refuses it for good if the id started again since (this
//!   process is then stale); the link then stops trying.
//! - While detached, an arbitration request is refused at once (no
//!   arbitrator, no survival: the documented rule), acks are dropped (the
//!   mgmd that sent the event is gone or counted the node as done), and the
//!   last status is kept to be sent on reattach.
//! - An ack reaches mgmd only on the session whose event it answers. mgmd
//!   numbers events per process, so the event loop sees the link's own ids
//!   and an ack from before a reattach could otherwise match another event
//!   of a restarted mgmd.
//! - Every exchange with mgmd is bounded in time; a reattach attempt that
//!   hangs counts as a failed one.

use shoal_mgmd::{DataNodeConfig, DataNodeSession, MgmClient, MgmEvent, NodeStatus};
use shoal_types::{ErrorCode, ShoalError, TableDef, TableId};
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc as tmpsc;

/// First wait before reattaching after mgmd was lost; doubles after every
/// failed attempt up to [`REATTACH_BACKOFF_MAX`].
pub const REATTACH_BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest wait between two reattach attempts.
pub const REATTACH_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// Longest one reattach attempt (connect and answer) may take.
const REATTACH_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a peer-address poll may wait for mgmd; past it the session
/// counts as lost (mgmd answers it from memory, so it is never slow).
const PEER_POLL_TIMEOUT: Duration = Duration::from_secs(10);
/// How often peer addresses are polled while some are unknown.
const PEER_POLL_EVERY: Duration = Duration::from_millis(100);
/// Once every peer is known, one poll in this many ticks (about once a
/// second): a restarted node may come back on a new port.
const PEER_POLL_SLOW_TICKS: u64 = 10;

/// From the link to the event loop.
pub enum LinkEvent {
    Schema {
        event_id: u64,
        event: MgmEvent,
    },
    /// mgmd asked the node to stop.
    Shutdown(String),
    /// mgmd went away; the node keeps serving (as NDB data nodes do) and
    /// the link tries to reattach.
    MgmdLost(String),
    /// The link is back with mgmd, same node id and start. `tables` is
    /// mgmd's schema now (create the ones the node lacks), `dropped` the
    /// tables the node was told of that mgmd no longer has (drop them).
    /// Events sent before this one are older than the snapshot.
    Reattached {
        tables: Vec<TableDef>,
        dropped: Vec<TableId>,
    },
    /// mgmd refused the reattach for good (the id started again since, or
    /// mgmd no longer knows this start); the node serves without mgmd.
    ReattachRefused(String),
    /// The other data nodes' listen addresses, as far as mgmd knows them
    /// (a node that has not reported its port yet is missing).
    Peers(Vec<(u16, String, u16)>),
    /// The arbitrator's answer (no answer, or no mgmd, is a refusal).
    Arbitration {
        granted: bool,
    },
}

/// From the event loop to the link.
pub enum LinkRequest {
    Ack {
        event_id: u64,
        result: Result<(), ShoalError>,
    },
    Status(NodeStatus),
    /// Ask the arbitrator whether `survivors` may go on after `view`
    /// (knowing of views up to `newest`).
    Arbitrate {
        view: u64,
        newest: u64,
        survivors: Vec<u16>,
    },
}

pub struct Registration {
    pub node_id: u16,
    pub cluster_id: u64,
    /// This start of the node (mgmd counts them).
    pub incarnation: u32,
    pub config: DataNodeConfig,
    pub tables: Vec<TableDef>,
}

pub struct MgmLink {
    pub registration: Registration,
    pub events: mpsc::Receiver<LinkEvent>,
    pub requests: tmpsc::UnboundedSender<LinkRequest>,
}

/// Connects and registers (blocking), then leaves a thread serving the link.
pub fn start(
    mgmd_addr: &str,
    node_id: Option<u16>,
    waker: Arc<mio::Waker>,
) -> Result<MgmLink, ShoalError> {
    let (reg_tx, reg_rx) = mpsc::channel::<Result<Registration, ShoalError>>();
    let (ev_tx, ev_rx) = mpsc::channel::<LinkEvent>();
    let (req_tx, req_rx) = tmpsc::unbounded_channel::<LinkRequest>();
    let addr = mgmd_addr.to_string();
    std::thread::Builder::new()
        .name("mgm-link".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime for the mgmd link");
            rt.block_on(serve(addr, node_id, reg_tx, ev_tx, req_rx, waker));
        })
        .expect("spawn mgm-link thread");
    let registration = reg_rx
        .recv()
        .map_err(|_| ShoalError::with_detail(ErrorCode::MgmdFailure, "mgmd link thread died"))??;
    Ok(MgmLink {
        registration,
        events: ev_rx,
        requests: req_tx,
    })
}

/// One reattach attempt in flight (its backoff wait included).
type ReattachAttempt = Pin<Box<dyn Future<Output = Result<DataNodeSession, ShoalError>>>>;

/// The link's state between the select arms.
struct Link {
    addr: String,
    node_id: u16,
    incarnation: u32,
    cluster_id: u64,
    ev_tx: mpsc::Sender<LinkEvent>,
    waker: Arc<mio::Waker>,
    /// `None` while detached from mgmd.
    session: Option<DataNodeSession>,
    /// The reattach attempt under way, if detached and still trying.
    reattach: Option<ReattachAttempt>,
    /// Wait before the next attempt if the one under way fails.
    backoff: Duration,
    /// Event ids the event loop was given in the current session → mgmd's
    /// ids. Cleared when the session breaks; an entry leaves on its ack
    /// (the event loop acks every event).
    forwarded: HashMap<u64, u64>,
    next_forward_id: u64,
    /// Tables the event loop was told of (the first schema, creates and
    /// drops since): what a reattach compares mgmd's schema with.
    known_tables: BTreeSet<TableId>,
    /// The event loop's last status, sent at once after a reattach.
    last_status: Option<NodeStatus>,
}

impl Link {
    fn notify(&self, ev: LinkEvent) {
        let _ = self.ev_tx.send(ev);
        let _ = self.waker.wake();
    }

    /// Hands an mgmd event to the event loop (or, for a stop request,
    /// acks it and tells the event loop to stop).
    async fn forward(&mut self, mgmd_event_id: u64, event: MgmEvent) {
        match event {
            MgmEvent::Shutdown => {
                if let Some(s) = self.session.as_mut() {
                    let _ = s.ack_event(mgmd_event_id, Ok(())).await;
                }
                self.notify(LinkEvent::Shutdown("mgmd asked the node to stop".into()));
            }
            event => {
                match &event {
                    MgmEvent::TableCreated(def) => {
                        self.known_tables.insert(def.id);
                    }
                    MgmEvent::TableDropped { id } => {
                        self.known_tables.remove(id);
                    }
                    MgmEvent::IndexesChanged(_) => {}
                    MgmEvent::Shutdown => {}
                }
                let event_id = self.next_forward_id;
                self.next_forward_id += 1;
                self.forwarded.insert(event_id, mgmd_event_id);
                self.notify(LinkEvent::Schema { event_id, event });
            }
        }
    }

    async fn ack(&mut self, event_id: u64, result: Result<(), ShoalError>) {
        let Some(mgmd_event_id) = self.forwarded.remove(&event_id) else {
            tracing::debug!("dropping the ack of an event from an earlier mgmd session");
            return;
        };
        if let Some(s) = self.session.as_mut() {
            if let Err(e) = s.ack_event(mgmd_event_id, result).await {
                tracing::warn!("acking mgmd event {mgmd_event_id} failed: {e}");
            }
        }
    }

    async fn report(&mut self, status: NodeStatus) {
        self.last_status = Some(status.clone());
        if let Some(s) = self.session.as_mut() {
            if let Err(e) = s.report_status(status).await {
                tracing::warn!("status report to mgmd failed: {e}");
            }
        }
    }

    /// The session broke: keep serving, start reattaching.
    fn lose(&mut self, why: String) {
        if self.session.take().is_none() {
            return;
        }
        // Acks for these events would reach the wrong session (or none).
        self.forwarded.clear();
        self.reattach = Some(self.attempt(REATTACH_BACKOFF_MIN));
        self.backoff = (REATTACH_BACKOFF_MIN * 2).min(REATTACH_BACKOFF_MAX);
        self.notify(LinkEvent::MgmdLost(why));
    }

    /// One reattach attempt after waiting `delay`.
    fn attempt(&self, delay: Duration) -> ReattachAttempt {
        let addr = self.addr.clone();
        let (node_id, incarnation, cluster_id) = (self.node_id, self.incarnation, self.cluster_id);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            let attempt = async {
                MgmClient::connect(&addr)
                    .await?
                    .reattach_data_node(node_id, incarnation, cluster_id)
                    .await
            };
            match tokio::time::timeout(REATTACH_ATTEMPT_TIMEOUT, attempt).await {
                Ok(result) => result,
                Err(_) => Err(ShoalError::with_detail(
                    ErrorCode::MgmdFailure,
                    format!(
                        "no answer from mgmd at {addr} within {} s",
                        REATTACH_ATTEMPT_TIMEOUT.as_secs()
                    ),
                )),
            }
        })
    }

    /// The outcome of a reattach attempt.
    async fn reattached(&mut self, result: Result<DataNodeSession, ShoalError>) {
        let session = match result {
            Ok(s) => s,
            Err(e) if e.code == ErrorCode::HandshakeRejected => {
                // mgmd will never take this start back: retrying is noise.
                tracing::error!("mgmd refuses the reattach, giving up: {e}");
                self.notify(LinkEvent::ReattachRefused(e.to_string()));
                return;
            }
            Err(e) => {
                tracing::debug!(
                    "reattaching to mgmd failed, next try in {} ms: {e}",
                    self.backoff.as_millis()
                );
                // Bounded retries would leave a healthy node detached for
                // good after a long mgmd outage; the wait is capped instead.
                self.reattach = Some(self.attempt(self.backoff));
                self.backoff = (self.backoff * 2).min(REATTACH_BACKOFF_MAX);
                return;
            }
        };
        let tables = session.initial_tables().to_vec();
        let now: BTreeSet<TableId> = tables.iter().map(|t| t.id).collect();
        let dropped: Vec<TableId> = self.known_tables.difference(&now).copied().collect();
        self.known_tables = now;
        self.session = Some(session);
        tracing::info!(
            "reattached to mgmd at {} as data node {} (start {})",
            self.addr,
            self.node_id,
            self.incarnation
        );
        self.notify(LinkEvent::Reattached { tables, dropped });
        // mgmd shows a reattached node as starting until it reports.
        if let Some(status) = self.last_status.clone() {
            self.report(status).await;
        }
    }
}

/// The next event of `session`; never, while detached.
async fn next_event(session: Option<&mut DataNodeSession>) -> Result<(u64, MgmEvent), ShoalError> {
    match session {
        Some(s) => s.next_event().await,
        None => std::future::pending().await,
    }
}

/// The outcome of the reattach attempt under way; never, if none is.
async fn reattach_outcome(
    attempt: Option<&mut ReattachAttempt>,
) -> Result<DataNodeSession, ShoalError> {
    match attempt {
        Some(a) => a.await,
        None => std::future::pending().await,
    }
}

async fn serve(
    addr: String,
    node_id: Option<u16>,
    reg_tx: mpsc::Sender<Result<Registration, ShoalError>>,
    ev_tx: mpsc::Sender<LinkEvent>,
    mut req_rx: tmpsc::UnboundedReceiver<LinkRequest>,
    waker: Arc<mio::Waker>,
) {
    let session: Result<DataNodeSession, ShoalError> = async {
        let client = MgmClient::connect(&addr).await?;
        client.register_data_node(node_id).await
    }
    .await;
    let session = match session {
        Ok(s) => s,
        Err(e) => {
            let _ = reg_tx.send(Err(e));
            return;
        }
    };
    let _ = reg_tx.send(Ok(Registration {
        node_id: session.node_id(),
        cluster_id: session.cluster_id(),
        incarnation: session.incarnation(),
        config: session.config().clone(),
        tables: session.initial_tables().to_vec(),
    }));
    // Peer addresses are polled often until every other data node is
    // known, then now and then: a restarted node may come back on a new
    // port.
    let peers_wanted = session.config().cluster_data_nodes.len().saturating_sub(1);
    let mut link = Link {
        addr,
        node_id: session.node_id(),
        incarnation: session.incarnation(),
        cluster_id: session.cluster_id(),
        ev_tx,
        waker,
        known_tables: session.initial_tables().iter().map(|t| t.id).collect(),
        session: Some(session),
        reattach: None,
        backoff: REATTACH_BACKOFF_MIN,
        forwarded: HashMap::new(),
        next_forward_id: 1,
        last_status: None,
    };
    let mut peers_known = 0usize;
    let mut poll = tokio::time::interval(PEER_POLL_EVERY);
    // Ticks missed while detached (or while a poll waited) are not made up
    // in a burst.
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut polls = 0u64;
    loop {
        tokio::select! {
            _ = poll.tick(), if link.session.is_some() && peers_wanted > 0 => {
                polls += 1;
                if peers_known == peers_wanted && !polls.is_multiple_of(PEER_POLL_SLOW_TICKS) {
                    continue;
                }
                let Some(session) = link.session.as_mut() else { continue };
                match tokio::time::timeout(PEER_POLL_TIMEOUT, session.data_nodes()).await {
                    Ok(Ok(nodes)) => {
                        let peers: Vec<(u16, String, u16)> = nodes
                            .into_iter()
                            .filter(|n| n.node_id != link.node_id)
                            .filter_map(|n| {
                                let port = n.status.as_ref().map_or(0, |s| s.listen_port);
                                (port != 0).then_some((n.node_id, n.host, port))
                            })
                            .collect();
                        peers_known = peers.len();
                        link.notify(LinkEvent::Peers(peers));
                    }
                    Ok(Err(e)) => {
                        tracing::warn!("asking mgmd for the data nodes failed: {e}");
                        link.lose(e.to_string());
                    }
                    Err(_) => {
                        let why = format!(
                            "mgmd did not answer within {} s",
                            PEER_POLL_TIMEOUT.as_secs()
                        );
                        tracing::warn!("{why}");
                        link.lose(why);
                    }
                }
            }
            ev = next_event(link.session.as_mut()) => match ev {
                Ok((event_id, event)) => link.forward(event_id, event).await,
                Err(e) => link.lose(e.to_string()),
            },
            attached = reattach_outcome(link.reattach.as_mut()) => {
                link.reattach = None;
                link.reattached(attached).await;
                if link.session.is_some() {
                    // Poll at once: mgmd may have learnt new ports meanwhile.
                    peers_known = 0;
                }
            }
            req = req_rx.recv() => match req {
                None => return,
                Some(LinkRequest::Ack { event_id, result }) => link.ack(event_id, result).await,
                Some(LinkRequest::Status(status)) => link.report(status).await,
                Some(LinkRequest::Arbitrate {
                    view,
                    newest,
                    survivors,
                }) => {
                    let granted = match link.session.as_mut() {
                        None => {
                            tracing::warn!(
                                "arbitration needed while mgmd is unreachable: taken as a refusal"
                            );
                            false
                        }
                        Some(s) => match s.arbitrate(view, newest, survivors).await {
                            Ok(granted) => granted,
                            Err(e) => {
                                tracing::warn!("asking the arbitrator (mgmd) failed, taken as a refusal: {e}");
                                false
                            }
                        },
                    };
                    link.notify(LinkEvent::Arbitration { granted });
                }
            },
        }
    }
}
