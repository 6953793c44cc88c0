//! TC and failed nodes: this coordinator's transactions that used a failed
//! node, and taking over the transactions of a failed coordinator.
//!
//! - A transaction not yet deciding to commit that used a failed node (an
//!   operation on it, or state there) aborts with a temporary error; one
//!   committing or completing goes on without the failed node (its
//!   replicas are gone; the surviving ones hold the commit).
//! - Takeover (the president's TC, NDB's LQH_TRANSREQ): every live LQH
//!   reports the failed coordinator's transactions it holds (records, and
//!   commit markers of commits whose client has not acknowledged them);
//!   each transaction any replica committed is committed everywhere, the
//!   rest aborted, every lock released. The takeover is then *resolved*:
//!   epochs may be saved again. Once the newest epoch any of them
//!   committed in is durable (a client may have asked for a durable
//!   commit; the takeover cannot tell), each client hears its outcome
//!   (`TcKeyFailConf`), then that every other transaction of the failed
//!   coordinator is aborted (`TcNodeFailRep`), and every member that the
//!   takeover is done (`TakeoverDone`: the commit markers may go). Should
//!   this node fail before that, the takeover is still pending everywhere
//!   and the next president's takeover finds the markers and reports.

use super::{AbortReply, Tc, TxnState, Wave};
use crate::dih::Dih;
use crate::node::Output;
use crate::signal::{BlockSignal, ClusterSignal, FragKey, TxnRef};
use shoal_types::{ErrorCode, ShoalError, TransId};
use shoal_wire::{Signal, TcKeyFailConf, TcNodeFailRep};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A failed coordinator's transaction as the replicas reported it.
#[derive(Debug, Default)]
struct Found {
    api_node: u16,
    trans: TransId,
    committed: bool,
    /// The epoch a replica committed it in (0: none did, or no epochs).
    epoch: u64,
    /// Per reporting node, the fragments it holds rows of.
    parts: BTreeMap<u16, Vec<FragKey>>,
}

/// Taking over one failed coordinator.
#[derive(Debug)]
pub struct Takeover {
    incarnation: u32,
    /// Members whose report is not complete yet.
    missing: BTreeSet<u16>,
    found: BTreeMap<TxnRef, Found>,
    /// Transactions rebuilt here and not finished yet.
    finishing: BTreeSet<TxnRef>,
    /// Every report is in and the transactions are rebuilt.
    rebuilt: bool,
    /// The transactions found committed, by client (API node): each
    /// client's list goes in the final `TcNodeFailRep`.
    committed: BTreeMap<u16, Vec<TransId>>,
    /// The newest epoch one of them committed in: their reports wait
    /// until it is durable.
    max_epoch: u64,
    /// Every transaction found is finished (committed or aborted).
    resolved: bool,
}

impl Tc {
    /// Nodes failed (a view dropped them): settle this coordinator's
    /// transactions that used them.
    pub fn nodes_failed(
        &mut self,
        failed: &[u16],
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        self.members.retain(|m| !failed.contains(m));
        self.scans_nodes_failed(failed, out);
        let refs: Vec<TxnRef> = self.txns.iter().map(|(r, _)| r).collect();
        for r in refs {
            let Some(t) = self.txns.get_mut(&r) else {
                continue;
            };
            let had_part = t.parts.iter().any(|p| failed.contains(&p.node));
            // The failed nodes' state is gone; nothing more is sent there.
            t.parts.retain(|p| !failed.contains(&p.node));
            let waited = t.awaiting.len();
            t.awaiting.retain(|n| !failed.contains(n));
            let confirmations_lost = t.awaiting.len() < waited;
            let node_failed = || {
                ShoalError::with_detail(
                    ErrorCode::NodeFailed,
                    format!(
                        "data node(s) {failed:?} used by the transaction failed; it was aborted: retry it"
                    ),
                )
            };
            match &t.state {
                TxnState::Executing => {
                    // Operations through a failed node never answer.
                    let mut hit = false;
                    for i in 0..t.answered.len().min(t.op_chains.len()) {
                        if !t.answered[i] && t.op_chains[i].iter().any(|n| failed.contains(n)) {
                            t.answered[i] = true;
                            t.outstanding -= 1;
                            if t.op_chains[i].len() > 1 {
                                t.outstanding_chained -= 1;
                            }
                            hit = true;
                        }
                    }
                    if !(hit || had_part) {
                        continue;
                    }
                    if t.backups_committed {
                        // Decided: the commit goes on without the failed
                        // node (nothing is outstanding: one operation).
                        continue;
                    }
                    match t.pending_abort.take() {
                        Some(reply) => {
                            t.pending_abort = Some(reply);
                            if t.outstanding_chained == 0 {
                                let reply = t.pending_abort.take().expect("set");
                                self.send_aborts(r, reply, q, out);
                            }
                        }
                        None => {
                            let reply = if t.client_gone {
                                AbortReply::Silent
                            } else {
                                AbortReply::Failed {
                                    error: node_failed(),
                                    op_index: super::NO_OP,
                                }
                            };
                            self.abort(r, reply, q, out);
                        }
                    }
                }
                TxnState::Open if had_part => {
                    let reply = if t.client_gone {
                        AbortReply::Silent
                    } else {
                        AbortReply::Later(node_failed())
                    };
                    self.abort(r, reply, q, out);
                }
                TxnState::Committing(wave) if confirmations_lost && t.awaiting.is_empty() => {
                    match *wave {
                        Wave::Backups => self.commit_wave(r, Wave::Primaries, q, out),
                        Wave::Primaries => self.committed(r, q, out),
                    }
                }
                TxnState::Completing if confirmations_lost && t.awaiting.is_empty() => {
                    self.completed(r, q, out)
                }
                TxnState::Aborting(_) if confirmations_lost && t.awaiting.is_empty() => {
                    self.aborted(r, q, out)
                }
                _ => {}
            }
        }
        // Takeovers in progress do not wait for failed reporters.
        let waiting: Vec<u16> = self.takeovers.keys().copied().collect();
        for node in waiting {
            let tk = self.takeovers.get_mut(&node).expect("listed");
            for f in failed {
                tk.missing.remove(f);
            }
            self.maybe_rebuild(node, dih, q, out);
        }
    }

    /// Whether this TC is taking over `node`.
    pub fn is_taking_over(&self, node: u16) -> bool {
        self.takeovers.contains_key(&node)
    }

    /// Starts taking over failed coordinator `failed` (in `incarnation`):
    /// asks every live member's LQH (this node's included) for its
    /// transactions.
    pub fn start_takeover(&mut self, failed: u16, incarnation: u32, q: &mut VecDeque<BlockSignal>) {
        if self.takeovers.contains_key(&failed) {
            return;
        }
        let own = self.cfg.node_id;
        for &m in &self.members {
            q.push_back(BlockSignal::from(ClusterSignal::TakeoverReq {
                to: m,
                failed,
                incarnation,
                takeover: own,
            }));
        }
        self.takeovers.insert(
            failed,
            Takeover {
                incarnation,
                missing: self.members.iter().copied().collect(),
                found: BTreeMap::new(),
                max_epoch: 0,
                resolved: false,
                finishing: BTreeSet::new(),
                rebuilt: false,
                committed: BTreeMap::new(),
            },
        );
    }

    /// One transaction of a failed coordinator, as a replica holds it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn takeover_report(
        &mut self,
        reporter: u16,
        txn: TxnRef,
        api_node: u16,
        trans: TransId,
        committed: bool,
        epoch: u64,
        frags: Vec<FragKey>,
    ) {
        let failed = crate::signal::tc_node_of(txn);
        let Some(tk) = self.takeovers.get_mut(&failed) else {
            return;
        };
        if tk.rebuilt || !tk.missing.contains(&reporter) {
            return; // late or repeated
        }
        let f = tk.found.entry(txn).or_default();
        f.api_node = api_node;
        f.trans = trans;
        f.committed |= committed;
        f.epoch = f.epoch.max(epoch);
        let held = f.parts.entry(reporter).or_default();
        for frag in frags {
            super::add_frag(held, frag);
        }
    }

    /// `reporter` has reported everything it holds of `failed`.
    pub(super) fn takeover_reported(
        &mut self,
        reporter: u16,
        failed: u16,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let Some(tk) = self.takeovers.get_mut(&failed) else {
            return;
        };
        tk.missing.remove(&reporter);
        self.maybe_rebuild(failed, dih, q, out);
    }

    /// Once every report is in: rebuild each transaction here and finish
    /// it (commit if any replica committed, else abort).
    pub fn maybe_rebuild(
        &mut self,
        failed: u16,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let Some(tk) = self.takeovers.get_mut(&failed) else {
            return;
        };
        if tk.rebuilt || !tk.missing.is_empty() {
            return;
        }
        tk.rebuilt = true;
        let found = std::mem::take(&mut tk.found);
        let commits = found.values().filter(|f| f.committed).count();
        out.push(Output::Log(format!(
            "takeover of data node {failed}: {} transaction(s) found, {commits} committing, {} aborting",
            found.len(),
            found.len() - commits
        )));
        // Listed as unfinished before any is finished: one may end at once.
        for txn in found.keys() {
            if !self.txns.contains_key(txn) {
                tk.finishing.insert(*txn);
            }
        }
        for (txn, f) in found {
            if self.txns.contains_key(&txn) {
                continue;
            }
            let members = &self.members;
            let t = self.txns.get_or_insert(txn);
            t.conn = u64::MAX;
            t.trans = f.trans;
            t.api_node = f.api_node;
            t.client_gone = true;
            t.taken_over_from = Some(failed);
            t.state = TxnState::Executing;
            for (node, frags) in f.parts {
                if !members.contains(&node) || frags.is_empty() {
                    continue;
                }
                // Written on a table read from any replica: its backups
                // apply at complete here too.
                if frags
                    .iter()
                    .any(|f| dih.table(f.0).is_some_and(|d| d.read_backup))
                {
                    t.ack_after_complete = true;
                }
                let part = t.part_mut(node);
                for frag in frags {
                    let primary = dih
                        .frag(frag.0, frag.1)
                        .and_then(|d| d.read)
                        .is_some_and(|c| c[0] == node);
                    if primary {
                        super::add_frag(&mut part.primary, frag);
                    } else {
                        super::add_frag(&mut part.backup, frag);
                    }
                }
            }
            if t.parts.is_empty() {
                // Held by no live node (a commit marker only, or its nodes
                // failed as well): the reports tell its outcome.
                t.committed = f.committed;
                // Its epoch, for the report's wait (0 with epochs running
                // would be a record lost: the current one stands in).
                t.epoch = if f.committed && f.epoch == 0 {
                    self.epoch_now.current
                } else {
                    f.epoch
                };
                if f.committed && self.cfg.report_commit_points {
                    out.push(Output::CommitDone {
                        conn: t.conn,
                        trans: t.trans,
                        txn,
                    });
                }
                self.remove(txn, q, out);
            } else if f.committed {
                // Some replica committed (in the epoch it reports): so do
                // all (backups first), in that epoch. (A replica that only
                // remembers the commit reports its epoch too; an epoch 0
                // with epochs running would be a record lost, so the
                // current one stands in rather than none.)
                let epoch = if f.epoch == 0 {
                    self.epoch_now.current
                } else {
                    f.epoch
                };
                self.count_in_epoch(txn, epoch);
                if let Some(t) = self.txns.get_mut(&txn) {
                    t.epoch = epoch;
                }
                self.commit_wave(txn, Wave::Backups, q, out);
            } else {
                self.send_aborts(txn, AbortReply::Silent, q, out);
            }
        }
        self.maybe_takeover_done(failed, q, out);
    }

    /// A taken-over transaction finished (committed in `epoch`, or not):
    /// its client hears once the takeover is resolved and that epoch is
    /// durable.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn taken_over_finished(
        &mut self,
        failed: u16,
        txn: TxnRef,
        api_node: u16,
        trans: TransId,
        committed: bool,
        epoch: u64,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let Some(tk) = self.takeovers.get_mut(&failed) else {
            return;
        };
        tk.finishing.remove(&txn);
        if committed {
            tk.committed.entry(api_node).or_default().push(trans);
            tk.max_epoch = tk.max_epoch.max(epoch);
        }
        self.maybe_takeover_done(failed, q, out);
    }

    /// Whether the takeover of `node` has finished every transaction it
    /// found (its reports may still wait for their epoch to be durable):
    /// until then no epoch may be saved.
    pub fn takeover_resolved(&self, node: u16) -> bool {
        self.takeovers.get(&node).is_some_and(|tk| tk.resolved)
    }

    /// The durable epoch moved: takeovers waiting for it report.
    pub(super) fn takeovers_durable(
        &mut self,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let due: Vec<u16> = self
            .takeovers
            .iter()
            .filter(|(_, tk)| tk.resolved && tk.max_epoch <= self.durable_epoch)
            .map(|(&n, _)| n)
            .collect();
        for failed in due {
            self.maybe_takeover_done(failed, q, out);
        }
    }

    fn maybe_takeover_done(
        &mut self,
        failed: u16,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let durable = self.durable_epoch;
        let Some(tk) = self.takeovers.get_mut(&failed) else {
            return;
        };
        if !tk.rebuilt || !tk.finishing.is_empty() {
            return;
        }
        if !tk.resolved {
            tk.resolved = true;
            if tk.max_epoch > durable {
                out.push(Output::Log(format!(
                    "takeover of data node {failed} (start {}) resolved; its reports wait for epoch {} to be durable",
                    tk.incarnation, tk.max_epoch
                )));
            }
        }
        if tk.max_epoch > durable {
            return;
        }
        let incarnation = tk.incarnation;
        let committed = self.takeovers.remove(&failed).expect("present").committed;
        out.push(Output::Log(format!(
            "takeover of data node {failed} (start {incarnation}) finished"
        )));
        // Each client hears each of its commits, then the whole list
        // (which covers the aborted ones too).
        for (&api_node, list) in &committed {
            for &trans in list {
                self.report_outcome(failed, incarnation, api_node, trans, out);
            }
        }
        if self.cfg.report_commit_points {
            out.push(Output::TakeoverFinished {
                node: failed,
                incarnation,
            });
        }
        // Every client connected here learns which of its transactions of
        // the failed coordinator committed; the rest are aborted.
        let conns: Vec<(u64, u16)> = self.clients.iter().map(|(&c, k)| (c, k.api_node)).collect();
        for (conn, api_node) in conns {
            if api_node == 0 {
                continue; // a client without an API node id cannot be told apart
            }
            let mine = committed.get(&api_node).cloned().unwrap_or_default();
            out.push(Output::Send {
                conn,
                signal: Signal::TcNodeFailRep(TcNodeFailRep {
                    node: failed,
                    incarnation,
                    committed: mine,
                }),
            });
        }
        for &m in &self.members {
            q.push_back(BlockSignal::from(ClusterSignal::TakeoverDone {
                to: m,
                failed,
                incarnation,
            }));
        }
    }

    /// Tells the client of a taken-over transaction that it committed, on
    /// every connection its API node has here.
    fn report_outcome(
        &self,
        failed: u16,
        incarnation: u32,
        api_node: u16,
        trans: TransId,
        out: &mut Vec<Output>,
    ) {
        let conns: Vec<u64> = self
            .clients
            .iter()
            .filter(|(_, k)| k.api_node == api_node && api_node != 0)
            .map(|(&c, _)| c)
            .collect();
        for conn in conns {
            out.push(Output::Send {
                conn,
                signal: Signal::TcKeyFailConf(TcKeyFailConf {
                    node: failed,
                    incarnation,
                    trans,
                    committed: true,
                }),
            });
        }
    }
}
