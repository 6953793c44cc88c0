//! Links between data nodes: one TCP connection per pair, opened by the
//! node with the lower id, with the same handshake and frames as clients
//! (node type "data node", each side naming its start number). A link
//! belongs to one start (incarnation) of its peer: signals the kernel
//! addresses to another start of that node are dropped, as are signals
//! for a node with no link — the kernel learns of the failure from the
//! link's loss or missing heartbeats and settles what was in flight.
//!
//! The kernel decides whether a link may open ([`DataNode::link_allowed`]):
//! a node the cluster declared failed is refused with code 5006 and stops
//! when it reads that (it must restart to rejoin); a restarted node whose
//! previous start is still being taken over is refused for now and tries
//! again.

use crate::conn::{Conn, Phase, Role};
use crate::event_loop::EventLoop;
use mio::{Interest, Poll, Token};
use shoal_kernel::qmgr::LinkRefusal;
use shoal_kernel::ConnId;
use shoal_types::ErrorCode;
use shoal_wire::{Hello, HelloReply, NodeType};
use std::net::{SocketAddr, ToSocketAddrs};

/// Wait between attempts to link to another data node.
const PEER_RETRY_MS: u64 = 200;

#[derive(Default)]
pub(crate) struct Peer {
    addr: Option<SocketAddr>,
    /// The link, once its handshake is done, and the peer's start number.
    pub conn: Option<ConnId>,
    incarnation: u32,
    /// A connection we opened whose handshake is not done yet.
    connecting: Option<ConnId>,
    next_attempt_ms: u64,
}

impl EventLoop {
    pub fn set_peer_addrs(&mut self, list: Vec<(u16, String, u16)>) {
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

    /// The link to data node `node` in `incarnation`, if up.
    pub fn link_to(&self, node: u16, incarnation: u32) -> Option<ConnId> {
        let p = self.peers.get(&node)?;
        p.conn.filter(|_| p.incarnation == incarnation)
    }

    /// Opens links to the data nodes with higher ids that have none.
    pub fn connect_peers(&mut self, poll: &Poll) {
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
            let mut conn = Conn::new(
                stream,
                addr,
                now,
                self.limits.max_frame_bytes,
                self.limits.max_signals,
            );
            conn.phase = Phase::AwaitReply;
            conn.role = Role::Peer {
                node: id,
                incarnation: 0,
            };
            let hello = Hello::new(NodeType::DataNode, self.cluster_id, me, id)
                .with_incarnation(self.incarnation);
            conn.push_raw(&hello.encode());
            self.conns.insert(conn_id, conn);
            self.dirty.push(conn_id);
            self.peers.get_mut(&id).expect("listed").connecting = Some(conn_id);
        }
    }

    /// Whether data node `from` (in `incarnation`) may open a link here.
    pub fn judge_peer_hello(
        &self,
        from: u16,
        incarnation: u32,
    ) -> Result<Role, (ErrorCode, String)> {
        let refuse = |why: String| Err((ErrorCode::HandshakeRejected, why));
        match self.peers.get(&from) {
            None => {
                return refuse(format!(
                    "node {from} is not another data node of this cluster"
                ))
            }
            Some(_) if from > self.node_id => {
                return refuse(format!(
                    "data node {from} must wait for node {} to connect (the lower id connects)",
                    self.node_id
                ))
            }
            Some(p) if p.conn.is_some() => {
                return refuse(format!(
                    "data node {from} is already linked (start {}); retry once that link is gone",
                    p.incarnation
                ))
            }
            Some(_) => {}
        }
        match self.node.link_allowed(from, incarnation) {
            Ok(()) => Ok(Role::Peer {
                node: from,
                incarnation,
            }),
            Err(LinkRefusal::DeclaredFailed(why)) => Err((ErrorCode::NodeDeclaredFailed, why)),
            Err(refusal) => refuse(refusal.detail().to_string()),
        }
    }

    /// The answer to our Hello on link `id`. `Ok(true)`: the link is up;
    /// `Ok(false)`: not all of it is here yet; `Err`: close the link.
    pub fn peer_reply(&mut self, id: ConnId, _poll: &Poll) -> Result<bool, String> {
        let conn = self.conns.get_mut(&id).expect("present");
        let Role::Peer { node: peer, .. } = conn.role else {
            unreachable!("only links to data nodes wait for a reply");
        };
        let (reply, used) = match HelloReply::decode(conn.input()) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(false),
            Err(e) => return Err(format!("bad handshake reply from data node {peer}: {e}")),
        };
        conn.consume(used);
        if reply.status == ErrorCode::NodeDeclaredFailed as u16 {
            // The cluster went on without this start of the node.
            self.node
                .declared_failed(reply.detail.clone(), &mut self.outputs);
            return Err(format!(
                "data node {peer} refused the link: {}",
                reply.detail
            ));
        }
        if reply.status != 0 || reply.node_id != peer {
            return Err(format!(
                "data node {peer} refused the link (status {}, node {}): {}",
                reply.status, reply.node_id, reply.detail
            ));
        }
        if let Err(refusal) = self.node.link_allowed(peer, reply.incarnation) {
            return Err(format!(
                "not linking to data node {peer} (start {}): {}",
                reply.incarnation,
                refusal.detail()
            ));
        }
        let conn = self.conns.get_mut(&id).expect("present");
        conn.phase = Phase::Open;
        conn.role = Role::Peer {
            node: peer,
            incarnation: reply.incarnation,
        };
        self.peer_linked(peer, reply.incarnation, id);
        Ok(true)
    }

    /// The link to data node `node` (start `incarnation`) is up.
    pub fn peer_linked(&mut self, node: u16, incarnation: u32, conn: ConnId) {
        let peer = self.peers.get_mut(&node).expect("a configured peer");
        peer.conn = Some(conn);
        peer.incarnation = incarnation;
        peer.connecting = None;
        tracing::info!("linked to data node {node} (start {incarnation})");
        let now = self.now_ms();
        self.node
            .peer_linked(now, node, incarnation, &mut self.outputs);
    }

    /// Connection `id` to data node `node` closed: a link attempt failed,
    /// or the link is lost.
    pub fn peer_closed(&mut self, node: u16, id: ConnId, why: &str) {
        let p = self.peers.get_mut(&node).expect("a configured peer");
        if p.connecting == Some(id) {
            p.connecting = None;
        }
        if p.conn != Some(id) {
            tracing::debug!("link attempt to data node {node} failed: {why}");
            return;
        }
        p.conn = None;
        tracing::warn!("lost the link to data node {node}: {why}");
        eprintln!(
            "data node {}: lost the link to data node {node} (start {}): {why}",
            self.node_id, p.incarnation
        );
        let now = self.now_ms();
        self.node.peer_link_lost(now, node, &mut self.outputs);
    }
}
