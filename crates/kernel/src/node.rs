//! One data node's blocks wired together. The driver (runtime or
//! simulator) hands it client signals, disconnects, schema changes and
//! clock ticks; it runs every resulting local signal to completion and
//! returns what to send to clients.

use crate::config::KernelConfig;
use crate::lqh::Lqh;
use crate::route::TableRoute;
use crate::signal::BlockSignal;
use crate::tc::Tc;
use shoal_types::distribution::FragmentId;
use shoal_types::TransId;
use shoal_types::{ErrorCode, ShoalError, TableDef, TableId};
use shoal_wire::{OpResult, Signal};
use std::collections::VecDeque;

/// A client connection, numbered by the driver.
pub type ConnId = u64;

#[derive(Debug, PartialEq)]
pub enum Output {
    /// A signal for a client connection.
    Send { conn: ConnId, signal: Signal },
    /// A signal for the blocks of another data node.
    ToNode { node: u16, signal: BlockSignal },
    /// TC decided to commit this transaction (every operation prepared on
    /// every replica); the client hears `Committed` once the replicas
    /// confirm. Only with `KernelConfig::report_commit_points`: the
    /// simulator's model commits here.
    CommitPoint {
        conn: ConnId,
        trans: TransId,
        results: Vec<OpResult>,
    },
    /// Every replica confirmed the commit of this transaction (whether or
    /// not its client is still there to hear it). Only with
    /// `KernelConfig::report_commit_points`: between `CommitPoint` and this,
    /// readers may see the data before or after the commit.
    CommitDone {
        conn: ConnId,
        trans: TransId,
        /// The transaction's handle, to look it up on the replicas.
        txn: crate::signal::TxnRef,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeStats {
    pub data_memory_used_bytes: u64,
    pub data_memory_total_bytes: u64,
    pub rows: u64,
    pub transactions: u64,
    pub operations: u64,
}

pub struct DataNode {
    node_id: u16,
    tc: Tc,
    lqh: Lqh,
    queue: VecDeque<BlockSignal>,
}

impl DataNode {
    pub fn new(cfg: KernelConfig) -> Self {
        DataNode {
            node_id: cfg.node_id,
            tc: Tc::new(cfg.clone()),
            lqh: Lqh::new(cfg),
            queue: VecDeque::new(),
        }
    }

    /// Adds a table (mgmd's schema event). Re-adding a known id is a no-op.
    pub fn create_table(&mut self, def: &TableDef) {
        if !self.lqh.has_table(def.id) {
            let route = TableRoute::new(def, self.node_id);
            self.lqh.create_table(def, route.fragments_on(self.node_id));
            self.tc.add_table(def.id, route);
        }
    }

    pub fn drop_table(&mut self, now_ms: u64, id: TableId, out: &mut Vec<Output>) {
        self.tc.drop_table(id);
        self.lqh.drop_table(id, &mut self.queue);
        self.run(now_ms, out);
    }

    /// A signal from a client. An error means the client broke the protocol
    /// (sent a signal only nodes may send): the driver closes the connection.
    pub fn client_signal(
        &mut self,
        now_ms: u64,
        conn: ConnId,
        signal: Signal,
        out: &mut Vec<Output>,
    ) -> Result<(), ShoalError> {
        match signal {
            Signal::TcKeyReq(req) => {
                self.tc.client_req(now_ms, conn, req, &mut self.queue, out);
                self.run(now_ms, out);
                Ok(())
            }
            other => Err(ShoalError::with_detail(
                ErrorCode::ProtocolViolation,
                format!("a client may not send {}", other.name()),
            )),
        }
    }

    pub fn client_disconnected(&mut self, now_ms: u64, conn: ConnId, out: &mut Vec<Output>) {
        self.tc.client_gone(conn, &mut self.queue, out);
        self.run(now_ms, out);
    }

    /// The link to data node `node` went down: nothing more comes from
    /// that incarnation of it. Its transaction handles start over if it
    /// restarts, so what LQH remembers of its finished transactions (to
    /// drop repeats) is forgotten. (Taking over its transactions is the
    /// next step of the roadmap.)
    pub fn peer_link_lost(&mut self, node: u16) {
        self.lqh.forget_coordinator(node);
    }

    /// Periodic timer (the driver calls it every few milliseconds).
    pub fn tick(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        for token in self.lqh.expired_waits(now_ms) {
            self.lqh.expire_wait(now_ms, token, &mut self.queue);
            // The failed transaction aborts and releases its locks before
            // the next expired wait is considered.
            self.run(now_ms, out);
        }
        self.tc.tick(now_ms, &mut self.queue, out);
        self.run(now_ms, out);
    }

    /// The state this node's replicas keep of the transactions coordinated
    /// by `tc_node` (for taking over from a coordinator that failed).
    pub fn replica_transactions(&self, tc_node: u16) -> Vec<crate::lqh::ReplicaTxnState> {
        self.lqh.transactions_of(tc_node)
    }

    /// Rows per local fragment of `table`, by fragment id.
    pub fn fragment_rows(&self, table: TableId) -> Vec<(FragmentId, u64)> {
        self.lqh.fragment_rows(table)
    }

    /// The committed rows of a local fragment (see `Lqh::fragment_image`),
    /// or `None` if this node holds no replica of it.
    pub fn fragment_image(&self, table: TableId, frag: FragmentId) -> Option<Vec<Vec<u8>>> {
        self.lqh.fragment_image(table, frag)
    }

    pub fn stats(&self) -> NodeStats {
        NodeStats {
            data_memory_used_bytes: self.lqh.memory().used_bytes() as u64,
            data_memory_total_bytes: self.lqh.memory().limit_bytes() as u64,
            rows: self.lqh.row_count() as u64,
            transactions: self.tc.transaction_count() as u64,
            operations: self.lqh.ops_in_use() as u64,
        }
    }

    /// A signal from another data node's blocks.
    pub fn node_signal(&mut self, now_ms: u64, signal: BlockSignal, out: &mut Vec<Output>) {
        debug_assert_eq!(signal.destination(), self.node_id, "misrouted {signal:?}");
        self.queue.push_back(signal);
        self.run(now_ms, out);
    }

    /// Delivers queued signals to run completion: local ones to this
    /// node's blocks, the others out to their nodes.
    fn run(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        while let Some(sig) = self.queue.pop_front() {
            let node = sig.destination();
            if node != self.node_id {
                out.push(Output::ToNode { node, signal: sig });
            } else if sig.for_lqh() {
                self.lqh.handle(now_ms, sig, &mut self.queue);
            } else {
                self.tc.handle(now_ms, sig, &mut self.queue, out);
            }
        }
    }
}
