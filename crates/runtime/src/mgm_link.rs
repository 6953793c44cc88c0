//! The data node's link to mgmd, on its own thread with a small tokio
//! runtime: registers the node, forwards schema events and mgmd's stop
//! requests to the event loop (waking it), asks the arbitrator on the
//! node's behalf, and sends acks and status reports back.

use shoal_mgmd::{DataNodeConfig, DataNodeSession, MgmClient, MgmEvent, NodeStatus};
use shoal_types::{ShoalError, TableDef};
use std::sync::mpsc;
use std::sync::Arc;
use tokio::sync::mpsc as tmpsc;

/// From the link to the event loop.
pub enum LinkEvent {
    Schema {
        event_id: u64,
        event: MgmEvent,
    },
    /// mgmd asked the node to stop.
    Shutdown(String),
    /// mgmd went away; the node keeps serving (as NDB data nodes do).
    MgmdLost(String),
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
    /// Ask the arbitrator whether `survivors` may go on after `view`.
    Arbitrate {
        view: u64,
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
    let registration = reg_rx.recv().map_err(|_| {
        ShoalError::with_detail(shoal_types::ErrorCode::MgmdFailure, "mgmd link thread died")
    })??;
    Ok(MgmLink {
        registration,
        events: ev_rx,
        requests: req_tx,
    })
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
    let mut session = match session {
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
    let notify = |ev: LinkEvent| {
        let _ = ev_tx.send(ev);
        let _ = waker.wake();
    };
    let mut mgmd_alive = true;
    // Peer addresses are polled often until every other data node is
    // known, then now and then: a restarted node may come back on a new
    // port.
    let peers_wanted = session.config().cluster_data_nodes.len().saturating_sub(1);
    let own_id = session.node_id();
    let mut peers_known = 0usize;
    let mut poll = tokio::time::interval(std::time::Duration::from_millis(100));
    let mut polls = 0u64;
    loop {
        tokio::select! {
            _ = poll.tick(), if mgmd_alive && peers_wanted > 0 => {
                polls += 1;
                if peers_known == peers_wanted && polls % 10 != 0 {
                    continue;
                }
                match session.data_nodes().await {
                    Ok(nodes) => {
                        let peers: Vec<(u16, String, u16)> = nodes
                            .into_iter()
                            .filter(|n| n.node_id != own_id)
                            .filter_map(|n| {
                                let port = n.status.as_ref().map_or(0, |s| s.listen_port);
                                (port != 0).then_some((n.node_id, n.host, port))
                            })
                            .collect();
                        peers_known = peers.len();
                        notify(LinkEvent::Peers(peers));
                    }
                    Err(e) => tracing::warn!("asking mgmd for the data nodes failed: {e}"),
                }
            }
            ev = session.next_event(), if mgmd_alive => match ev {
                Ok((event_id, MgmEvent::Shutdown)) => {
                    let _ = session.ack_event(event_id, Ok(())).await;
                    notify(LinkEvent::Shutdown("mgmd asked the node to stop".into()));
                }
                Ok((event_id, event)) => notify(LinkEvent::Schema { event_id, event }),
                Err(e) => {
                    mgmd_alive = false;
                    notify(LinkEvent::MgmdLost(e.to_string()));
                }
            },
            req = req_rx.recv() => match req {
                None => return,
                Some(LinkRequest::Arbitrate { .. }) if !mgmd_alive => {
                    notify(LinkEvent::Arbitration { granted: false });
                }
                Some(_) if !mgmd_alive => {}
                Some(LinkRequest::Ack { event_id, result }) => {
                    if let Err(e) = session.ack_event(event_id, result).await {
                        tracing::warn!("acking mgmd event {event_id} failed: {e}");
                    }
                }
                Some(LinkRequest::Status(status)) => {
                    if let Err(e) = session.report_status(status).await {
                        tracing::warn!("status report to mgmd failed: {e}");
                    }
                }
                Some(LinkRequest::Arbitrate { view, survivors }) => {
                    let granted = match session.arbitrate(view, survivors).await {
                        Ok(granted) => granted,
                        Err(e) => {
                            tracing::warn!("asking the arbitrator (mgmd) failed, taken as a refusal: {e}");
                            false
                        }
                    };
                    notify(LinkEvent::Arbitration { granted });
                }
            },
        }
    }
}
