//! What the data nodes produce, routed and checked: signals onto the
//! network, answers checked against the model and sent to clients, the
//! model's commit points, the arbitrator's decisions, nodes stopping.
//!
//! The model commits a transaction when its first replica commits
//! (`ReplicaCommitted`): from then on it must commit everywhere (a
//! coordinator taking over commits what any replica committed). Its
//! results are checked when its coordinator decides to commit
//! (`CommitPoint`), which comes first — except when the last replica
//! decided (a one-operation transaction), whose results are all "done".

use std::collections::BTreeSet;

use rand::Rng;
use shoal_kernel::signal::{tc_node_of, TxnRef};
use shoal_kernel::{NodeRole, Output};
use shoal_types::arbitration::FORM_VIEW;
use shoal_types::{ErrorCode, TransId};
use shoal_wire::{OpResult, Signal, TcKeyConf, TransState};

use super::net::random_delay;
use super::{Decided, Event, Lane, NodeState, World, FIRST_API_NODE};
use crate::txn::Outcome;

/// An answer to a client, collected from one batch of outputs.
struct ClientAnswer {
    client: usize,
    conn: u64,
    trans: TransId,
    request: u32,
    signal: Signal,
}

impl World {
    /// Routes what one kernel call of data node `from` produced.
    ///
    /// Within the batch, commit points and first replica commits (in the
    /// order they happened) come before the answers: a commit releases
    /// locks inside the call, so an operation that waited for them may be
    /// answered before the commit is reported — yet it ran after it.
    pub(super) fn handle_outputs(&mut self, from: u16, out: Vec<Output>) -> Result<(), String> {
        self.note_view(from);
        // A node the cluster dropped (cut off by a split, frozen past the
        // failure detection) runs on until it learns it is out. It cannot
        // commit a write — every fragment it writes has a replica on the
        // side that survived, out of its reach — but it may still answer
        // reads, possibly stale ones. What it says to clients and of its
        // commits does not count: its clients hear the outcome from the
        // node taking over, and its data is discarded when it restarts.
        let zombie = self.node_declared_failed(from, self.nodes[from as usize - 1].incarnation);
        // Commit points and first replica commits, in the order they
        // happened.
        let mut commits = Vec::new();
        let mut answers = Vec::new();
        let mut finished = Vec::new();
        let mut done = Vec::new();
        for output in out {
            match output {
                Output::ToNode {
                    node,
                    incarnation,
                    signal,
                } => self.send_node_signal(from, node, incarnation, signal),
                Output::Send { conn, signal } => match signal {
                    Signal::TcKeyFailConf(_) | Signal::TcNodeFailRep(_) => {
                        let copy = signal.clone();
                        let at =
                            self.send(Lane::ToClient(conn), Event::ReportToClient { conn, signal });
                        self.maybe_repeat(at, || Event::ReportToClient { conn, signal: copy });
                    }
                    Signal::ScanTabConf(_) | Signal::ScanTabRef(_) if zombie => {}
                    Signal::ScanTabConf(_) | Signal::ScanTabRef(_) => {
                        let open = self.conns.get(&conn).is_some_and(|c| c.node == from);
                        if !open {
                            return Err(format!(
                                "node {from} answered a scan on connection {conn}, not its own"
                            ));
                        }
                        self.send(Lane::ToClient(conn), Event::ScanToClient { conn, signal });
                    }
                    Signal::TcKeyConf(_) | Signal::TcKeyRef(_) if zombie => {}
                    Signal::TcKeyConf(_) | Signal::TcKeyRef(_) => {
                        if let Some((direct, answered)) = &mut self.direct {
                            if *direct == conn {
                                *answered = Some(signal);
                                continue;
                            }
                        }
                        let Some(info) = self.conns.get(&conn).copied() else {
                            return Err(format!("node {from} answered unknown connection {conn}"));
                        };
                        if info.node != from {
                            return Err(format!(
                                "node {from} answered connection {conn}, which is to node {}",
                                info.node
                            ));
                        }
                        if !info.open {
                            continue; // the client is gone; nobody hears it
                        }
                        let (trans, request) = match &signal {
                            Signal::TcKeyConf(c) => (c.trans, c.request),
                            Signal::TcKeyRef(r) => (r.trans, r.request),
                            _ => unreachable!("matched above"),
                        };
                        answers.push(ClientAnswer {
                            client: info.client,
                            conn,
                            trans,
                            request,
                            signal,
                        });
                    }
                    other => return Err(format!("node {from} sent a client {other:?}")),
                },
                Output::CommitPoint { .. }
                | Output::ReplicaCommitted { .. }
                | Output::CommitDone { .. }
                | Output::AbortDone { .. }
                | Output::AbortDecided { .. }
                    if zombie => {}
                Output::AbortDecided { txn } => self.abort_decided(from, txn),
                Output::AbortDone { txn } => self.abort_done(from, txn)?,
                o @ (Output::CommitPoint { .. } | Output::ReplicaCommitted { .. }) => {
                    commits.push(o)
                }
                Output::CommitDone { txn, .. } => done.push(txn),
                Output::TakeoverFinished { node, incarnation } => {
                    finished.push((node, incarnation))
                }
                Output::Arbitrate {
                    view,
                    newest,
                    survivors,
                } => self.arbitrate(from, view, newest, survivors),
                Output::CloseLink { node } => self.close_link(from, node),
                Output::IndexesBuilt { table, error } => {
                    if let Some(why) = error {
                        return Err(format!(
                            "node {from}: an index build of table {table} failed: {why}"
                        ));
                    }
                    self.report.index_builds += 1;
                }
                Output::ShutDown { reason } => self.node_stopped(from, &reason),
                Output::Log(line) => {
                    if self.trace {
                        eprintln!("{:>8} ms node {from}: {line}", self.now);
                    }
                }
                Output::RedoWrite { lsn, bytes } => self.redo_write(from, lsn, &bytes),
                Output::RedoSync { lsn } => self.redo_sync(from, lsn),
                Output::SysfileWrite {
                    durable_epoch,
                    history,
                } => self.sysfile_write(from, durable_epoch, history)?,
                Output::SnapshotDone { epoch } => {
                    let incarnation = self.nodes[from as usize - 1].incarnation;
                    self.snapshot_audits.insert(from, (incarnation, epoch));
                }
                Output::LcpWrite { id, offset, bytes } => self.lcp_write(from, id, offset, &bytes),
                Output::LcpSync { id } => self.lcp_sync(from, id),
                Output::LcpRecord { chain, redo_start } => {
                    self.lcp_record(from, chain, redo_start)?
                }
                Output::Restored { epoch } => self.restored(from, epoch)?,
            }
        }
        for o in commits {
            match o {
                Output::CommitPoint {
                    conn,
                    trans,
                    txn,
                    results,
                } => self.commit_point(from, conn, trans, txn, results)?,
                Output::ReplicaCommitted {
                    txn,
                    api_node,
                    trans,
                    epoch,
                } => self.first_replica_commit(from, txn, api_node, trans, epoch)?,
                _ => unreachable!("collected above"),
            }
        }
        for a in answers {
            self.answer(from, a)?;
        }
        for txn in done {
            self.commit_done(from, txn)?;
        }
        for (node, incarnation) in finished {
            self.takeover_finished(from, node, incarnation)?;
        }
        Ok(())
    }

    /// TC decided to commit: check the request's results as the
    /// confirmation will carry them.
    fn commit_point(
        &mut self,
        from: u16,
        conn: u64,
        trans: TransId,
        txn: TxnRef,
        results: Vec<OpResult>,
    ) -> Result<(), String> {
        if self.direct.as_ref().is_some_and(|(c, _)| *c == conn) {
            return Ok(());
        }
        let Some(info) = self.conns.get(&conn).copied() else {
            return Err(format!(
                "node {from}: a commit point for unknown connection {conn}"
            ));
        };
        let client = info.client;
        let (model, def) = (&self.model, &self.def);
        let t = self
            .orphans
            .get_mut(&(client, trans))
            .or_else(|| {
                self.clients[client]
                    .slots
                    .iter_mut()
                    .flatten()
                    .find(|t| t.trans == trans)
            })
            .ok_or_else(|| {
                format!(
                    "commit point of unknown transaction {} of client {client}",
                    trans.0
                )
            })?;
        if let Some(earlier) = &t.commit_point {
            // The last replica decided first (its results: all done).
            if *earlier != results {
                return Err(format!(
                    "client {client} transaction {}: committed at its last replica with {earlier:?}, its coordinator decided with {results:?}",
                    trans.0
                ));
            }
            return Ok(());
        }
        let conf = TcKeyConf {
            trans,
            request: t.requests_sent - 1,
            state: TransState::Committed,
            ack_wanted: false,
            results: results.clone(),
        };
        let outcome = t
            .check_conf(&conf, model, def)
            .map_err(|e| format!("client {client} transaction {}: {e}", trans.0))?;
        let Outcome::Committed(writes) = outcome else {
            return Err(format!("a commit point answered as {outcome:?}"));
        };
        t.commit_point = Some(results);
        let locked = t.dependencies();
        if self.trace {
            eprintln!(
                "{:>8} ms commit decided: client {client} trans {} ({txn:#x}): {writes:?}",
                self.now, trans.0
            );
        }
        if writes.is_empty() {
            self.empty_commits.insert((client, trans));
        }
        self.decided.insert(
            txn,
            Decided {
                client,
                trans,
                writes,
                locked,
            },
        );
        Ok(())
    }

    /// The first replica committed `txn`: the model commits it.
    fn first_replica_commit(
        &mut self,
        from: u16,
        txn: TxnRef,
        api_node: u16,
        trans: TransId,
        epoch: u64,
    ) -> Result<(), String> {
        if api_node == 0 {
            return Ok(()); // the checker's own request
        }
        let incarnation = self.nodes[from as usize - 1].incarnation;
        if let Some(holders) = self.commit_holders.get_mut(&txn) {
            holders.push((from, incarnation));
        }
        if self.in_progress.contains_key(&txn) || self.applied.contains(&txn) {
            return Ok(());
        }
        let client = api_node.wrapping_sub(FIRST_API_NODE) as usize;
        if client >= self.clients.len() {
            return Err(format!(
                "a replica committed {txn:#x} of unknown API node {api_node}"
            ));
        }
        if self.must_not_commit.contains(&(client, trans)) {
            return Err(format!(
                "client {client} transaction {} ({txn:#x}) committed at a replica after it was reported aborted",
                trans.0
            ));
        }
        let (writes, locked) = match self.decided.remove(&txn) {
            Some(d) => {
                debug_assert_eq!((d.client, d.trans), (client, trans));
                (d.writes, d.locked)
            }
            None => {
                // No decision seen: only a last replica deciding a
                // one-operation transaction may commit on its own.
                let (model, def) = (&self.model, &self.def);
                let Some(t) = self.orphans.get_mut(&(client, trans)).or_else(|| {
                    self.clients[client]
                        .slots
                        .iter_mut()
                        .flatten()
                        .find(|t| t.trans == trans)
                }) else {
                    return Err(format!(
                        "a replica committed {txn:#x} (client {client} transaction {}), which nobody decided to commit",
                        trans.0
                    ));
                };
                let ops = t.in_flight.as_ref().map_or(0, |r| r.ops.len());
                if ops != 1 || t.requests_sent != 1 {
                    return Err(format!(
                        "a replica committed client {client} transaction {} ({} requests, {ops} operations in the last) before its coordinator decided",
                        trans.0, t.requests_sent
                    ));
                }
                let results = vec![OpResult {
                    code: 0,
                    data: Vec::new(),
                }];
                let conf = TcKeyConf {
                    trans,
                    request: 0,
                    state: TransState::Committed,
                    ack_wanted: false,
                    results: results.clone(),
                };
                let outcome = t.check_conf(&conf, model, def).map_err(|e| {
                    format!(
                        "client {client} transaction {} (last replica decided): {e}",
                        trans.0
                    )
                })?;
                let Outcome::Committed(writes) = outcome else {
                    return Err(format!("a last replica's commit checked as {outcome:?}"));
                };
                t.commit_point = Some(results);
                (writes, t.dependencies())
            }
        };
        if self.trace {
            eprintln!(
                "{:>8} ms model commit #{} (epoch {epoch}): client {client} trans {}: {writes:?}",
                self.now,
                self.model.seq() + 1,
                trans.0
            );
        }
        if writes.is_empty() {
            self.empty_commits.insert((client, trans));
        } else if self.durable() && epoch == 0 {
            return Err(format!(
                "client {client} transaction {} committed its writes in no epoch (node {from} did not know the cluster's epoch yet)",
                trans.0
            ));
        }
        self.model
            .commit_after(epoch, writes.iter().cloned(), &locked)?;
        self.check_unique_after_commit(&writes)?;
        self.commit_epochs.insert((client, trans), epoch);
        self.applied.insert(txn);
        self.in_progress.insert(txn, self.model.seq());
        self.commit_holders.insert(txn, vec![(from, incarnation)]);
        self.txn_client.insert(txn, (client, trans));
        self.model_committed.insert((client, trans));
        self.report.committed += 1;
        self.digest(&[self.now, txn, 7]);
        // A transaction begun after the last failure committed.
        let serial = self
            .orphans
            .get(&(client, trans))
            .or_else(|| {
                self.clients[client]
                    .slots
                    .iter()
                    .flatten()
                    .find(|t| t.trans == trans)
            })
            .map(|t| t.serial);
        if let (Some((_, first)), Some(serial)) = (self.progress, serial) {
            if serial >= first {
                self.progress = None;
            }
        }
        Ok(())
    }

    /// TC at `from` decided to abort `txn`: from now on live replicas drop
    /// it (and release its locks). If the model committed it and every
    /// replica that committed it is gone, it never happened. (A live one
    /// that committed — its last replica decided — turns the abort into a
    /// commit; `abort_done` checks that.)
    fn abort_decided(&mut self, from: u16, txn: TxnRef) {
        if !self.applied.contains(&txn) {
            return;
        }
        let view = self.node_ref(from).map(|n| n.view().clone());
        let live_holder = self.commit_holders.get(&txn).is_some_and(|h| {
            h.iter().any(|&(n, i)| {
                view.as_ref()
                    .is_some_and(|v| v.member(n).is_some_and(|m| m.incarnation == i))
            })
        });
        if !live_holder {
            self.commit_holders.remove(&txn);
            self.take_back(txn);
        }
    }

    /// Transaction `txn` ended aborted at node `from`. If the model
    /// committed it, every replica that did must be gone (it committed at
    /// a last replica that died before anyone heard): the model takes it
    /// back. A live replica holding it would be an atomicity failure.
    fn abort_done(&mut self, from: u16, txn: TxnRef) -> Result<(), String> {
        if !self.applied.contains(&txn) {
            return Ok(());
        }
        let view = self.node_ref(from).map(|n| n.view().clone());
        let holders = self.commit_holders.remove(&txn).unwrap_or_default();
        if let Some(&(n, _)) = holders.iter().find(|&&(n, i)| {
            view.as_ref()
                .is_some_and(|v| v.member(n).is_some_and(|m| m.incarnation == i))
        }) {
            return Err(format!(
                "{txn:#x} was aborted, but live node {n} had committed it"
            ));
        }
        self.take_back(txn);
        Ok(())
    }

    /// The model forgets commit `txn`: it never happened.
    fn take_back(&mut self, txn: TxnRef) {
        let seq = self.in_progress.remove(&txn).expect("a commit in progress");
        self.model.uncommit(seq);
        self.applied.remove(&txn);
        if let Some(key) = self.txn_client.remove(&txn) {
            self.model_committed.remove(&key);
            self.must_not_commit.insert(key);
            // Its client waits for the answer: an abort now.
            if let Some(t) = self.clients[key.0]
                .slots
                .iter_mut()
                .flatten()
                .find(|t| t.trans == key.1)
            {
                t.taken_back = true;
            }
        }
        self.report.committed -= 1;
        if self.trace {
            eprintln!(
                "{:>8} ms model takes back commit #{seq} ({txn:#x}): its replicas died before anyone heard",
                self.now
            );
        }
    }

    /// The takeover of `failed` (in `incarnation`) is finished at node
    /// `from`: a commit of that coordinator not finished by now is aborted.
    /// That is right only if every replica that committed it is gone (then
    /// it never happened: the model takes it back); if one lives, the
    /// takeover lost a commit.
    fn takeover_finished(
        &mut self,
        from: u16,
        failed: u16,
        incarnation: u32,
    ) -> Result<(), String> {
        let view = self.node_ref(from).map(|n| n.view().clone());
        let live = |node: u16, inc: u32| {
            view.as_ref()
                .is_some_and(|v| v.member(node).is_some_and(|m| m.incarnation == inc))
        };
        let mut mine: Vec<TxnRef> = self
            .commit_holders
            .keys()
            .copied()
            .filter(|&t| {
                shoal_kernel::signal::tc_node_of(t) == failed
                    && shoal_kernel::signal::tc_incarnation_of(t) == incarnation as u8
            })
            .collect();
        mine.sort_unstable();
        for txn in mine {
            let holders = self.commit_holders.remove(&txn).expect("listed");
            if let Some(&(n, _)) = holders.iter().find(|&&(n, i)| live(n, i)) {
                return Err(format!(
                    "the takeover of node {failed} finished without committing {txn:#x}, which live node {n} committed"
                ));
            }
            // Only dead replicas held it: it never happened.
            self.take_back(txn);
        }
        Ok(())
    }

    /// Every replica confirmed the commit of `txn`: check it.
    fn commit_done(&mut self, from: u16, txn: TxnRef) -> Result<(), String> {
        let coordinator = tc_node_of(txn);
        // The live replicas: the reporting node's view (a node it dropped
        // holds nothing that counts; it stops and starts empty).
        let view = self.node_ref(from).map(|n| n.view().clone());
        for id in 1..=self.opts.data_nodes {
            let incarnation = self.nodes[id as usize - 1].incarnation;
            let member = view
                .as_ref()
                .is_some_and(|v| v.member(id).is_some_and(|m| m.incarnation == incarnation));
            if !member {
                continue;
            }
            if let Some(n) = self.node_ref(id) {
                if let Some(r) = n
                    .replica_transactions(coordinator)
                    .iter()
                    .find(|r| r.txn == txn)
                {
                    if r.pending_rows != 0 {
                        return Err(format!(
                            "node {from} reported the commit of {txn:#x} done, but node {id} still holds {} uncommitted row(s) of it",
                            r.pending_rows
                        ));
                    }
                }
            }
        }
        self.commit_holders.remove(&txn);
        // A commit that wrote nothing may finish without any replica
        // having committed it (its one replica failed first).
        let empty = self.decided.get(&txn).is_some_and(|d| d.writes.is_empty());
        if empty {
            self.decided.remove(&txn);
        }
        if self.in_progress.remove(&txn).is_none()
            && !self.applied.contains(&txn)
            && self.direct.is_none()
            && !empty
        {
            return Err(format!(
                "node {from} finished a commit of {txn:#x} that no replica committed"
            ));
        }
        Ok(())
    }

    /// An answer to a client: checked against the model, then sent.
    fn answer(&mut self, from: u16, a: ClientAnswer) -> Result<(), String> {
        let ClientAnswer {
            client,
            conn,
            trans,
            request,
            signal,
        } = a;
        let code = match &signal {
            Signal::TcKeyConf(c) => c.state as u16,
            Signal::TcKeyRef(r) => r.code,
            _ => unreachable!("answers only"),
        };
        self.digest(&[self.now, conn, trans.0, u64::from(code)]);
        if self.trace {
            eprintln!(
                "{:>8} ms conn {conn} trans {} <- node {from}: {signal:?}",
                self.now, trans.0
            );
        }
        // An answer for a request the client does not wait for can only
        // answer a repeated request: it must refuse it.
        // In the outputs of a repeated request, a refusal answers the
        // repeat (a durable commit's own answer, released in the same
        // call, is the awaited one).
        let refusal_of_repeat = self.answering_repeat == Some((conn, trans, request))
            && match &signal {
                Signal::TcKeyRef(r) => {
                    r.code == ErrorCode::BadRequest as u16
                        || r.code == ErrorCode::TransactionNotFound as u16
                }
                _ => false,
            };
        let repeat = refusal_of_repeat;
        let waited_for = !repeat
            && self.clients[client]
                .slots
                .iter()
                .flatten()
                .find(|t| t.trans == trans)
                .is_some_and(|t| {
                    (t.in_flight.is_some() || t.commit_point.is_some())
                        && request + 1 == t.requests_sent
                        && t.coordinator.map(|c| c.0) == Some(conn)
                });
        if !waited_for {
            let refusal = match &signal {
                Signal::TcKeyRef(r) => {
                    r.code == ErrorCode::BadRequest as u16
                        || r.code == ErrorCode::TransactionNotFound as u16
                }
                Signal::TcKeyConf(c) => c.state == TransState::Aborted && c.results.is_empty(),
                _ => false,
            };
            let settled = !self.clients[client]
                .slots
                .iter()
                .flatten()
                .any(|t| t.trans == trans);
            if !refusal && !settled {
                return Err(format!(
                    "node {from} served a repeated request of conn {conn} trans {}: {signal:?}",
                    trans.0
                ));
            }
            if refusal {
                self.report.repeats_refused += 1;
            }
            self.send(
                Lane::ToClient(conn),
                Event::ToClient {
                    conn,
                    trans,
                    request,
                    repeat: true,
                },
            );
            return Ok(());
        }
        self.check_answer(client, trans, &signal)?;
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
        Ok(())
    }

    fn check_answer(
        &mut self,
        client: usize,
        trans: TransId,
        signal: &Signal,
    ) -> Result<(), String> {
        // A commit that writes nothing needs no replica to commit it: its
        // one replica may fail first, and the client still hears Committed.
        let committed_in_model = self.model_committed.contains(&(client, trans))
            || self.empty_commits.contains(&(client, trans));
        let model = &self.model;
        let def = &self.def;
        let t = self.clients[client]
            .slots
            .iter_mut()
            .flatten()
            .find(|t| t.trans == trans)
            .ok_or_else(|| format!("answer for unknown transaction {}: {signal:?}", trans.0))?;
        let outcome = match signal {
            Signal::TcKeyRef(r) if t.taken_back => {
                t.commit_point = None;
                t.taken_back = false;
                if r.code == shoal_types::ErrorCode::NodeFailed as u16 {
                    Ok(Outcome::Failed(r.code))
                } else {
                    Err(format!("taken back, then refused with {r:?}"))
                }
            }
            Signal::TcKeyConf(c) if t.commit_point.is_some() => {
                let expected = t.commit_point.take().expect("checked");
                if c.state != TransState::Committed || c.results != expected {
                    Err(format!(
                        "after its commit point the transaction was answered {c:?}, expected Committed with {expected:?}"
                    ))
                } else if !committed_in_model || t.taken_back {
                    Err("answered Committed, but no live replica committed it".to_string())
                } else {
                    t.ack_wanted = c.ack_wanted;
                    t.undelivered = Some(Outcome::Committed(Vec::new()));
                    return Ok(());
                }
            }
            Signal::TcKeyConf(c) => t.check_conf(c, model, def),
            Signal::TcKeyRef(r) if t.commit_point.is_some() => {
                Err(format!("refused after its commit point: {r:?}"))
            }
            Signal::TcKeyRef(r) => t.check_ref(r, model),
            _ => unreachable!("answers only"),
        }
        .map_err(|e| format!("client {client} transaction {}: {e}\nanswer: {signal:?}", trans.0))?;
        match &outcome {
            Outcome::Committed(writes) => {
                // Committed reads only: nothing to commit on a replica.
                if !writes.is_empty() {
                    return Err(format!(
                        "transaction {} committed writes without a commit point",
                        trans.0
                    ));
                }
                self.model.commit(0, Vec::new());
                self.report.committed += 1;
            }
            Outcome::RolledBack => self.report.rolled_back += 1,
            Outcome::Failed(code) => *self.report.failed.entry(*code).or_default() += 1,
            Outcome::Open => {}
        }
        let t = self.clients[client]
            .slots
            .iter_mut()
            .flatten()
            .find(|t| t.trans == trans)
            .expect("found above");
        if matches!(outcome, Outcome::Committed(_)) {
            if let Some((_, first)) = self.progress {
                if t.serial >= first {
                    self.progress = None;
                }
            }
        }
        if matches!(outcome, Outcome::RolledBack | Outcome::Failed(_)) {
            self.must_not_commit.insert((client, trans));
        }
        let t = self.clients[client]
            .slots
            .iter_mut()
            .flatten()
            .find(|t| t.trans == trans)
            .expect("found above");
        t.undelivered = Some(outcome);
        Ok(())
    }

    /// A president asks the arbitrator; the answer comes back if it can
    /// reach mgmd.
    fn arbitrate(&mut self, from: u16, view: u64, newest: u64, survivors: Vec<u16>) {
        let reachable = self
            .arbitrator_reach
            .as_ref()
            .is_none_or(|r| r.contains(&from));
        if !reachable {
            if self.trace {
                eprintln!("{:>8} ms node {from} cannot reach the arbitrator", self.now);
            }
            return;
        }
        let side: BTreeSet<u16> = survivors.into_iter().collect();
        let granted = if view == FORM_VIEW {
            // mgmd hears from every data node process that runs (a frozen
            // one keeps its session), and which are in a formed cluster
            // (started, or restoring or copying their rows).
            let started: BTreeSet<u16> = (1..=self.opts.data_nodes)
                .filter(|&n| {
                    self.node_ref(n).is_some_and(|d| {
                        matches!(
                            d.role(),
                            NodeRole::Started | NodeRole::Restoring | NodeRole::Starting { .. }
                        )
                    })
                })
                .collect();
            let running: BTreeSet<u16> = (1..=self.opts.data_nodes)
                .filter(|&n| self.node_ref(n).is_some())
                .collect();
            let everyone = side.len() == usize::from(self.opts.data_nodes);
            let allowed = self
                .formation
                .request(self.now, &side, &started, &running, everyone)
                .is_ok();
            // (A start of every node asks too; only partial ones count.)
            if !everyone {
                if allowed {
                    self.report.partial_starts += 1;
                } else {
                    self.report.partial_starts_refused += 1;
                }
            }
            allowed
        } else if self.opts.faults.arbitrator_grants_all {
            true
        } else {
            self.arbitrator.request(view, newest, &side)
        };
        if self.trace {
            eprintln!(
                "{:>8} ms arbitrator: view {view} (newest {newest}) {side:?} from node {from}: {}",
                self.now,
                if granted { "granted" } else { "refused" }
            );
        }
        let incarnation = self.nodes[from as usize - 1].incarnation;
        let at = self.now + 1 + random_delay(&mut self.rng, 10);
        self.schedule(
            at,
            Event::ArbitrationAnswer {
                node: from,
                incarnation,
                granted,
            },
        );
    }

    pub(super) fn arbitration_answer(
        &mut self,
        node: u16,
        incarnation: u32,
        granted: bool,
    ) -> Result<(), String> {
        if self.nodes[node as usize - 1].incarnation != incarnation {
            return Ok(());
        }
        let now = self.now;
        let Some(n) = self.running(node) else {
            return Ok(());
        };
        let mut out = Vec::new();
        n.arbitration_result(now, granted, &mut out);
        self.handle_outputs(node, out)
    }

    /// Data node `node` stopped itself: like a crash, then its supervisor
    /// starts it again.
    fn node_stopped(&mut self, node: u16, reason: &str) {
        if self.trace {
            eprintln!("{:>8} ms node {node} stops: {reason}", self.now);
        }
        self.report.shutdowns += 1;
        self.take_down(node);
        let delay = 100 + self.rng.random_range(0..400);
        self.schedule(self.now + delay, Event::Restart { node });
    }

    /// Data node `node` is gone: its links break (its peers see it at
    /// once), its clients lose their connections.
    pub(super) fn take_down(&mut self, node: u16) {
        self.nodes[node as usize - 1].state = NodeState::Down;
        self.crash_files(node);
        for peer in 1..=self.opts.data_nodes {
            if peer != node {
                self.break_link(node, peer, 5);
            }
        }
        self.node_conns_broken(node);
    }
}
