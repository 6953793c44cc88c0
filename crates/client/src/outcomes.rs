//! What a client learns when a transaction's coordinator fails: the data
//! node that takes the coordinator's transactions over tells every client
//! connected to it which of its commits went through
//! (`TcKeyFailConf`, one per commit, as each finishes) and, at the end,
//! that the takeover is complete (`TcNodeFailRep`, listing this client's
//! committed transactions once more; every other one is aborted).
//!
//! A commit whose connection was lost before the answer came waits here
//! for that report, up to a deadline; then its outcome is unknown
//! (`CommitOutcomeUnknown`, 4012). Reports come on any connection and may
//! arrive before the loss is noticed (a frozen node's socket stays open),
//! so they are kept per failed coordinator (node and start number).
//!
//! Shared by every connection of one [`crate::Cluster`], with the
//! transaction id counter: ids are unique per API node, as the reports
//! name transactions by id only.

use crate::conn::{Connection, Reply, SlotAnswerer};
use shoal_types::{ErrorCode, ShoalError, TransId};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// Reports about a finished takeover are kept this long (a connection
/// loss noticed late still finds them), unless a commit still waits.
const REPORTS_KEPT: Duration = Duration::from_secs(600);

/// One failed coordinator (a data node in one start).
type Coordinator = (u16, u32);

#[derive(Default)]
struct Takeover {
    /// Transactions reported committed so far.
    committed: HashSet<TransId>,
    /// The final report came: every transaction not committed is aborted.
    complete: bool,
    /// Commits waiting for their outcome.
    waiting: HashMap<TransId, SlotAnswerer>,
    last_report: Option<Instant>,
}

#[derive(Default)]
struct State {
    takeovers: HashMap<Coordinator, Takeover>,
    /// Open connections by the data node start they reach.
    conns: HashMap<Coordinator, Weak<Connection>>,
}

/// Transaction ids a connection takes from the shared counter at a time:
/// one atomic add per block, not one per transaction (the counter's cache
/// line would bounce between the client's threads on every transaction).
pub(crate) const TRANS_ID_BLOCK: u64 = 1024;

/// Answers a commit still waiting for its takeover's report with
/// `CommitOutcomeUnknown` when dropped.
struct Deadline {
    shared: Arc<Shared>,
    coordinator: Coordinator,
    trans: TransId,
    why: String,
}

impl Drop for Deadline {
    fn drop(&mut self) {
        let tx = lock(&self.shared.state)
            .takeovers
            .get_mut(&self.coordinator)
            .and_then(|t| t.waiting.remove(&self.trans));
        if let Some(tx) = tx {
            tx.answer(Err(ShoalError::with_detail(
                ErrorCode::CommitOutcomeUnknown,
                format!(
                    "connection to data node {} closed before the commit's answer ({}; waited {:?} for the node taking over), and no report of its outcome came",
                    self.coordinator.0, self.why, self.shared.wait
                ),
            )));
        }
    }
}

pub(crate) struct Shared {
    next_trans: AtomicU64,
    state: Mutex<State>,
    /// How long a commit whose connection was lost waits for a report.
    wait: Duration,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub fn new(wait: Duration) -> Arc<Shared> {
        Arc::new(Shared {
            next_trans: AtomicU64::new(0),
            state: Mutex::new(State::default()),
            wait,
        })
    }

    /// A block of [`TRANS_ID_BLOCK`] fresh transaction ids, unique for
    /// this API node: the first of them. Blocks taken later start higher.
    pub fn next_trans_block(&self) -> u64 {
        self.next_trans.fetch_add(TRANS_ID_BLOCK, Ordering::Relaxed) + 1
    }

    pub fn register(&self, node: u16, incarnation: u32, conn: &Arc<Connection>) {
        lock(&self.state)
            .conns
            .insert((node, incarnation), Arc::downgrade(conn));
    }

    /// `trans`, a commit sent to coordinator `(node, incarnation)`, lost
    /// its answer with the connection: answer `tx` once a takeover report
    /// tells the outcome, or with `CommitOutcomeUnknown` at the deadline.
    /// Answers are given outside this object's lock (answering locks the
    /// connection).
    pub fn await_outcome(
        self: &Arc<Self>,
        node: u16,
        incarnation: u32,
        trans: TransId,
        tx: SlotAnswerer,
        why: &str,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tx.answer(Err(ShoalError::with_detail(
                ErrorCode::CommitOutcomeUnknown,
                format!(
                    "connection to data node {node} closed before the commit's answer ({why}), and no report of its outcome came"
                ),
            )));
            return;
        };
        let known = {
            let mut st = lock(&self.state);
            let t = st.takeovers.entry((node, incarnation)).or_default();
            if t.committed.contains(&trans) || t.complete {
                Some((tx, t.committed.contains(&trans)))
            } else {
                t.waiting.insert(trans, tx);
                None
            }
        };
        if let Some((tx, committed)) = known {
            tx.answer(Ok(Reply::TakenOver { committed }));
            return;
        }
        // Answers at the deadline, or sooner if the task is dropped unrun
        // (its runtime shut down): the answerer, held here until then,
        // holds the connection, which holds this object.
        let deadline = Deadline {
            shared: Arc::clone(self),
            coordinator: (node, incarnation),
            trans,
            why: why.to_string(),
        };
        runtime.spawn(async move {
            tokio::time::sleep(deadline.shared.wait).await;
            drop(deadline);
        });
    }

    /// `TcKeyFailConf`: `trans` of coordinator `(node, incarnation)`
    /// committed.
    pub fn committed(&self, node: u16, incarnation: u32, trans: TransId) {
        let tx = {
            let mut st = lock(&self.state);
            let t = st.takeovers.entry((node, incarnation)).or_default();
            t.last_report = Some(Instant::now());
            t.committed.insert(trans);
            t.waiting.remove(&trans)
        };
        if let Some(tx) = tx {
            tx.answer(Ok(Reply::TakenOver { committed: true }));
        }
    }

    /// `TcNodeFailRep`: the takeover of `(node, incarnation)` is complete;
    /// `committed` are this client's commits, the rest aborted. Returns
    /// the connection to that start of the node, if one still looks open
    /// (the node is out of the cluster: close it).
    pub fn complete(
        &self,
        node: u16,
        incarnation: u32,
        committed: &[TransId],
    ) -> Option<Arc<Connection>> {
        let (answers, conn) = {
            let mut st = lock(&self.state);
            let now = Instant::now();
            st.takeovers.retain(|_, t| {
                !t.waiting.is_empty()
                    || t.last_report
                        .is_none_or(|at| now.duration_since(at) < REPORTS_KEPT)
            });
            let t = st.takeovers.entry((node, incarnation)).or_default();
            t.last_report = Some(now);
            t.committed.extend(committed.iter().copied());
            t.complete = true;
            let answers: Vec<(SlotAnswerer, bool)> = t
                .waiting
                .drain()
                .map(|(trans, tx)| (tx, t.committed.contains(&trans)))
                .collect();
            let conn = st
                .conns
                .remove(&(node, incarnation))
                .and_then(|w| w.upgrade());
            (answers, conn)
        };
        for (tx, committed) in answers {
            tx.answer(Ok(Reply::TakenOver { committed }));
        }
        conn
    }
}
