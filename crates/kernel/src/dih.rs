//! DIH, distribution: where each fragment's replicas are and which one is
//! the primary, as membership changes (NDB's DBDIH); and, on the
//! president, the control of a restarting node's copy.
//!
//! - Every table's fragment has a fixed preferred order of replicas (its
//!   node group, rotated: `DistributionMap`). Its **primary** is the first
//!   *ready* replica in that order: a started member, or the starting node
//!   once that fragment is copied to it. Writes go to the primary, then the
//!   other ready replicas, then a replica being copied (it takes every
//!   write while its rows arrive); reads go to the primary (or, for
//!   read-from-backup tables, a ready local replica).
//! - Each fragment has a **version**: the distribution version of the last
//!   view, or of the last change of a starting node's replica of it. TC
//!   puts it in every operation, and a replica whose version differs
//!   refuses the operation with a temporary error, so no route from before
//!   a failure or a restart step is acted on.
//! - The distribution version grows with every view and every change of a
//!   starting node's replica (`FragState`, sent by the president to every
//!   member over the same links as its views, so all apply them in the
//!   same order).
//! - **Node restart** (president): for each fragment of the starting node,
//!   in table and fragment order: mark its replica copying (every member),
//!   ask the primary's LQH to copy the rows (`CopyFragReq`), wait for the
//!   starting node's `CopyFragConf`, mark it ready. When all are ready
//!   (fragments of tables created meanwhile included), membership marks
//!   the node started and it takes its primaries back. A failure during
//!   the restart fails the starting node too (it starts over).
//!
//! Invariants: at most one member is not started; a fragment's version
//! changes whenever its write or read route does.

use crate::signal::{BlockSignal, Chain, ClusterSignal, FragKey, FragReplicaState, View};
use shoal_types::distribution::{distribution_key, DistributionMap, DistributionSpec, FragmentId};
use shoal_types::{hash_key, RowLayout, TableDef, TableId};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// One fragment's routes.
#[derive(Clone, Debug)]
pub struct FragDist {
    /// Every replica, in preferred order (the primary when all are up).
    pub replicas: Chain,
    /// The distribution version of the last change of its routes.
    pub version: u32,
    /// Where writes (and locking reads' locks) go: primary first. `None`:
    /// no replica is ready (the node group is lost).
    pub write: Option<Chain>,
    /// The primary alone.
    pub read: Option<Chain>,
    /// Bit i: `replicas[i]` is ready (readable).
    ready_mask: u8,
    /// The replica being copied, if any.
    pub copying: Option<u16>,
}

impl FragDist {
    pub fn is_ready(&self, node: u16) -> bool {
        self.replicas
            .iter()
            .position(|&n| n == node)
            .is_some_and(|i| self.ready_mask & (1 << i) != 0)
    }
}

/// A table's distribution: its key → fragment map and each fragment's
/// routes.
pub struct TableDist {
    pub layout: Arc<RowLayout>,
    key_columns: Option<u16>,
    map: DistributionMap,
    pub read_backup: bool,
    pub frags: Vec<FragDist>,
}

impl TableDist {
    /// The fragment of an encoded primary key. A malformed key maps to
    /// fragment 0, whose LQH then reports what is wrong with it.
    pub fn fragment_of(&self, key: &[u8]) -> FragmentId {
        match distribution_key(&self.layout, key, self.key_columns) {
            Ok(k) => self.map.fragment_of(hash_key(k)),
            Err(_) => 0,
        }
    }

    /// The fragment of a distribution key's hash.
    pub fn fragment_of_dist_key(&self, hash: u64) -> FragmentId {
        self.map.fragment_of(hash)
    }

    /// Where a committed read of `frag` goes when TC runs on `own`: a
    /// ready local replica if the table reads from backups, else the
    /// primary.
    pub fn committed_read_chain(&self, frag: FragmentId, own: u16) -> Option<Chain> {
        let f = &self.frags[frag as usize];
        if self.read_backup && f.is_ready(own) {
            Some(Chain::new(&[own]))
        } else {
            f.read
        }
    }

    /// The fragments with a replica on `node`.
    pub fn fragments_on(&self, node: u16) -> Vec<FragmentId> {
        (0..self.frags.len() as FragmentId)
            .filter(|&f| self.frags[f as usize].replicas.contains(&node))
            .collect()
    }
}

/// What the president's restart control asks of the other blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DihEvent {
    /// Every fragment is copied to `node`: membership marks it started.
    NodeCopied(u16),
    /// The restart of `node` cannot go on: fail it (it starts over).
    RestartFailed { node: u16, why: String },
    /// A fragment was copied (for the log and for progress).
    FragmentCopied {
        node: u16,
        table: TableId,
        frag: FragmentId,
        rows: u64,
        bytes: u64,
        done: usize,
        total: usize,
    },
}

/// The president's control of one node's restart.
struct RestartControl {
    node: u16,
    plan: VecDeque<FragKey>,
    /// The fragment being copied.
    current: Option<FragKey>,
    /// Waiting for the starting node to confirm it applied the copying
    /// state of `current` (of this version) before the copy may start:
    /// then it is a member and takes the rows.
    awaiting_conf: Option<(u32, u16)>,
    /// When the copying state awaiting confirmation was last sent (`None`:
    /// sent, the time taken at the next tick). It is sent again every
    /// [`FRAG_STATE_RESEND_MS`] until confirmed: the first is sent with the
    /// view commit that admits the node and is lost with it when their
    /// link breaks before the node is a member (a break that goes
    /// unnoticed: only members are suspected), or the confirmation may be
    /// lost. A repeat is confirmed again and changes nothing.
    sent_ms: Option<u64>,
    done: usize,
}

/// How long the president waits for a starting node to confirm a
/// fragment's copying state before sending it again.
const FRAG_STATE_RESEND_MS: u64 = 1_000;

pub struct Dih {
    own: u16,
    dist_version: u32,
    view: View,
    tables: BTreeMap<TableId, TableDist>,
    /// The starting member (the one not started) and its replicas' states.
    starting_node: Option<u16>,
    starting: BTreeMap<FragKey, FragReplicaState>,
    /// President only.
    restart: Option<RestartControl>,
    /// The epoch commits belong to now (kept by [`crate::gcp::Gcp`];
    /// here because TC and LQH read it where they read routes).
    epoch_now: EpochNow,
    /// This (starting) node kept the rows its files restored, by table:
    /// they stand for the end of this epoch, and a copy need only bring
    /// rows changed after it (see `lqh::copy`).
    own_rows_since: BTreeMap<TableId, u64>,
}

/// What TC and LQH need of the epoch protocol at a commit decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochNow {
    /// The epoch a commit decided now belongs to (0: no epochs run).
    pub current: u64,
    /// An epoch switch is being prepared: decide no commit until it is
    /// done (so a transaction never lands in an earlier epoch than one
    /// whose changes it saw).
    pub holding: bool,
    /// This node's rows are those of the cluster (restored to the
    /// cluster's restart epoch, or nothing to restore): it may serve.
    pub restored: bool,
}

impl Dih {
    pub fn new(own: u16) -> Dih {
        Dih {
            own,
            dist_version: 0,
            view: View {
                number: 0,
                dist_version: 0,
                members: Vec::new(),
                history: 0,
            },
            tables: BTreeMap::new(),
            starting_node: None,
            starting: BTreeMap::new(),
            restart: None,
            epoch_now: EpochNow {
                current: 0,
                holding: false,
                restored: true,
            },
            own_rows_since: BTreeMap::new(),
        }
    }

    /// This node joins a running cluster keeping the rows of these tables
    /// as of the end of an epoch (empty: it copies every row).
    pub fn set_own_rows_since(&mut self, since: BTreeMap<TableId, u64>) {
        self.own_rows_since = since;
    }

    #[inline(always)]
    pub fn epoch_now(&self) -> EpochNow {
        self.epoch_now
    }

    pub(crate) fn set_epoch_now(&mut self, now: EpochNow) {
        self.epoch_now = now;
    }

    /// The president of the view in force.
    pub fn president(&self) -> Option<u16> {
        self.view.president()
    }

    pub fn dist_version(&self) -> u32 {
        self.dist_version
    }

    pub fn table(&self, id: TableId) -> Option<&TableDist> {
        self.tables.get(&id)
    }

    pub fn frag(&self, table: TableId, frag: FragmentId) -> Option<&FragDist> {
        self.tables.get(&table)?.frags.get(frag as usize)
    }

    pub fn has_table(&self, id: TableId) -> bool {
        self.tables.contains_key(&id)
    }

    /// Whether `node` is starting and its replica of `(table, frag)` is
    /// being copied.
    /// The start of `node` in the view in force, if it is a member.
    pub fn incarnation_of(&self, node: u16) -> Option<u32> {
        self.view.member(node).map(|m| m.incarnation)
    }

    pub fn is_copying(&self, node: u16, table: TableId, frag: FragmentId) -> bool {
        self.starting_node == Some(node)
            && self.starting.get(&(table, frag)) == Some(&FragReplicaState::Copying)
    }

    /// This node's own start: the fragments being copied now.
    pub fn copying_now(&self) -> Vec<FragKey> {
        if self.starting_node != Some(self.own) {
            return Vec::new();
        }
        self.starting
            .iter()
            .filter(|(_, s)| **s == FragReplicaState::Copying)
            .map(|(k, _)| *k)
            .collect()
    }

    /// This node's own start: fragments copied so far and in all, while it
    /// is not started.
    pub fn start_progress(&self) -> Option<(u64, u64)> {
        if self.starting_node != Some(self.own) {
            return None;
        }
        let total: usize = self
            .tables
            .values()
            .map(|t| t.fragments_on(self.own).len())
            .sum();
        let ready = self
            .starting
            .values()
            .filter(|s| **s == FragReplicaState::Ready)
            .count();
        Some((ready as u64, total as u64))
    }

    /// Adds a table (schema event). Its fragments' routes follow the
    /// current view.
    pub fn create_table(&mut self, def: &TableDef) {
        if self.tables.contains_key(&def.id) {
            return;
        }
        let spec = def
            .distribution
            .clone()
            .unwrap_or_else(|| DistributionSpec::single_node(self.own, 1));
        // The table was validated (mgmd, or the node's own check of
        // mgmd's schema); a spec that yields no map is refused there.
        let map = spec.map().expect("a validated distribution");
        let frags = map
            .fragments
            .iter()
            .map(|f| FragDist {
                replicas: Chain::new(&f.replicas),
                version: 0,
                write: None,
                read: None,
                ready_mask: 0,
                copying: None,
            })
            .collect();
        let mut t = TableDist {
            layout: Arc::new(RowLayout::new(def)),
            key_columns: def.options.distribution_key_columns,
            map,
            read_backup: def.options.read_backup,
            frags,
        };
        for f in 0..t.frags.len() {
            self.route(def.id, f as FragmentId, &mut t.frags[f], true);
        }
        self.tables.insert(def.id, t);
    }

    /// The table's definition changed without changing its rows (an
    /// ordered index added or dropped): routes stay, the layout is new.
    pub fn alter_table(&mut self, def: &TableDef) {
        if let Some(t) = self.tables.get_mut(&def.id) {
            t.layout = Arc::new(RowLayout::new(def));
        }
    }

    pub fn drop_table(&mut self, id: TableId) {
        self.tables.remove(&id);
        self.starting.retain(|(t, _), _| *t != id);
    }

    /// Recomputes one fragment's routes; bumps its version if they changed
    /// (or `fresh`: a new table).
    fn route(&self, table: TableId, frag: FragmentId, f: &mut FragDist, fresh: bool) {
        let mut ready_mask = 0u8;
        let mut copying = None;
        for (i, &n) in f.replicas.iter().enumerate() {
            let Some(m) = self.view.member(n) else {
                continue;
            };
            if m.started {
                ready_mask |= 1 << i;
            } else if self.starting_node == Some(n) {
                match self.starting.get(&(table, frag)) {
                    Some(FragReplicaState::Ready) => ready_mask |= 1 << i,
                    Some(FragReplicaState::Copying) => copying = Some(n),
                    None => {}
                }
            }
        }
        let mut ready: Vec<u16> = f
            .replicas
            .iter()
            .enumerate()
            .filter(|(i, _)| ready_mask & (1 << i) != 0)
            .map(|(_, &n)| n)
            .collect();
        // A starting node takes its primaries back only once started: the
        // primary is the first started ready replica in preferred order.
        if let Some(p) = ready
            .iter()
            .position(|&n| self.view.member(n).is_some_and(|m| m.started))
        {
            let primary = ready.remove(p);
            ready.insert(0, primary);
        }
        let (write, read) = if ready.is_empty() {
            (None, None)
        } else {
            let mut w = ready.clone();
            w.extend(copying);
            (Some(Chain::new(&w)), Some(Chain::new(&ready[..1])))
        };
        let changed = fresh
            || f.write != write
            || f.read != read
            || f.ready_mask != ready_mask
            || f.copying != copying;
        if changed {
            f.write = write;
            f.read = read;
            f.ready_mask = ready_mask;
            f.copying = copying;
            f.version = self.dist_version;
        }
    }

    /// Every fragment's routes, all at the current version: a view change
    /// restarts every fragment's version at the view's, so members that
    /// saw different histories (one joined later) agree from here on.
    fn reroute_all(&mut self) {
        let ids: Vec<TableId> = self.tables.keys().copied().collect();
        for id in ids {
            let mut t = self.tables.remove(&id).expect("listed");
            for f in 0..t.frags.len() {
                self.route(id, f as FragmentId, &mut t.frags[f], true);
            }
            self.tables.insert(id, t);
        }
    }

    /// A view came into force.
    pub fn view_changed(&mut self, view: &View) {
        self.dist_version = self.dist_version.max(view.dist_version);
        let starting = view.members.iter().find(|m| !m.started).map(|m| m.node);
        assert!(
            view.members.iter().filter(|m| !m.started).count() <= 1,
            "at most one member starts at a time: {view:?}"
        );
        if starting != self.starting_node {
            self.starting.clear();
            self.starting_node = starting;
        }
        if self
            .restart
            .as_ref()
            .is_some_and(|r| Some(r.node) != starting)
        {
            self.restart = None;
        }
        self.view = view.clone();
        self.reroute_all();
    }

    /// `FragState` from the president (or its own, locally).
    fn frag_state(
        &mut self,
        dist_version: u32,
        table: TableId,
        frag: FragmentId,
        node: u16,
        state: FragReplicaState,
    ) {
        // Repeats and stale updates change nothing.
        if dist_version <= self.dist_version || self.starting_node != Some(node) {
            return;
        }
        self.dist_version = dist_version;
        self.starting.insert((table, frag), state);
        if let Some(mut t) = self.tables.remove(&table) {
            if let Some(f) = t.frags.get_mut(frag as usize) {
                // The fragment takes this version even if its routes here
                // stay as they were: the starting node learns a copy
                // first and the others one version later, and every
                // member must then agree on the fragment's version.
                self.route(table, frag, f, true);
            }
            self.tables.insert(table, t);
        }
    }

    pub fn handle(
        &mut self,
        from: u16,
        sig: ClusterSignal,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<DihEvent>,
    ) {
        match sig {
            ClusterSignal::FragState {
                dist_version,
                table,
                frag,
                node,
                state,
                ..
            } => {
                let president = self.view.president();
                if president == Some(from) || from == self.own {
                    self.frag_state(dist_version, table, frag, node, state);
                    if node == self.own && from != self.own {
                        let since = match state {
                            FragReplicaState::Copying => {
                                self.own_rows_since.get(&table).copied().unwrap_or(0)
                            }
                            FragReplicaState::Ready => 0,
                        };
                        q.push_back(BlockSignal::from(ClusterSignal::FragStateConf {
                            to: from,
                            dist_version,
                            since,
                        }));
                    }
                }
            }
            ClusterSignal::FragStateConf {
                dist_version,
                since,
                ..
            } => {
                let Some(r) = self.restart.as_mut() else {
                    return;
                };
                if r.awaiting_conf != Some((dist_version, from)) {
                    return;
                }
                r.awaiting_conf = None;
                let (table, frag) = r.current.expect("a fragment being copied");
                let target = r.node;
                self.broadcast_state(table, frag, target, FragReplicaState::Copying, q);
                let Some(primary) = self.frag(table, frag).and_then(|f| f.read).map(|c| c[0])
                else {
                    return;
                };
                // On the same link as the state change, after it: the
                // primary refuses routes without the copying replica
                // before it starts copying.
                q.push_back(BlockSignal::from(ClusterSignal::CopyFragReq {
                    to: primary,
                    table,
                    frag,
                    target,
                    since,
                }));
            }
            ClusterSignal::CopyFragConf {
                table,
                frag,
                node,
                rows,
                bytes,
                ..
            } => {
                let Some(r) = self.restart.as_mut() else {
                    return;
                };
                if r.node != node || r.current != Some((table, frag)) {
                    return;
                }
                r.current = None;
                r.done += 1;
                let done = r.done;
                let total = done + r.plan.len();
                events.push(DihEvent::FragmentCopied {
                    node,
                    table,
                    frag,
                    rows,
                    bytes,
                    done,
                    total,
                });
                self.broadcast_state(table, frag, node, FragReplicaState::Ready, q);
                self.restart_step(q, events);
            }
            ClusterSignal::CopyFragRef {
                table,
                frag,
                node,
                detail,
                ..
            } => {
                let Some(r) = self.restart.as_mut() else {
                    return;
                };
                if r.node != node || r.current != Some((table, frag)) {
                    return;
                }
                r.current = None;
                if self.tables.contains_key(&table) {
                    events.push(DihEvent::RestartFailed {
                        node,
                        why: format!("copying fragment {frag} of table {table} failed: {detail}"),
                    });
                    self.restart = None;
                } else {
                    // The table was dropped meanwhile: nothing to copy.
                    self.restart_step(q, events);
                }
            }
            other => panic!("DIH got a signal for another block: {other:?}"),
        }
    }

    /// Sends a starting replica's new state to every member (this node
    /// included, through its own queue) at the next distribution version.
    fn broadcast_state(
        &mut self,
        table: TableId,
        frag: FragmentId,
        node: u16,
        state: FragReplicaState,
        q: &mut VecDeque<BlockSignal>,
    ) {
        let v = self.dist_version + 1;
        for m in &self.view.members {
            q.push_back(BlockSignal::from(ClusterSignal::FragState {
                to: m.node,
                dist_version: v,
                table,
                frag,
                node,
                state,
            }));
        }
        // Apply at once here, so the next step sees it (the signal to
        // itself then finds it applied).
        self.frag_state(v, table, frag, node, state);
    }

    /// President: drive the restart of the starting member, if any.
    pub fn president_tick(
        &mut self,
        now_ms: u64,
        is_president: bool,
        q: &mut VecDeque<BlockSignal>,
        events: &mut Vec<DihEvent>,
    ) {
        if !is_president {
            self.restart = None;
            return;
        }
        let Some(node) = self.starting_node else {
            return;
        };
        if let Some(r) = self.restart.as_mut() {
            if let (Some((v, to)), Some((table, frag))) = (r.awaiting_conf, r.current) {
                match r.sent_ms {
                    None => r.sent_ms = Some(now_ms),
                    Some(at) if now_ms >= at + FRAG_STATE_RESEND_MS => {
                        r.sent_ms = Some(now_ms);
                        q.push_back(BlockSignal::from(ClusterSignal::FragState {
                            to,
                            dist_version: v,
                            table,
                            frag,
                            node: r.node,
                            state: FragReplicaState::Copying,
                        }));
                    }
                    Some(_) => {}
                }
            }
        }
        if self.restart.is_none() {
            let mut plan = VecDeque::new();
            for (&id, t) in &self.tables {
                for f in t.fragments_on(node) {
                    plan.push_back((id, f));
                }
            }
            self.restart = Some(RestartControl {
                node,
                plan,
                current: None,
                awaiting_conf: None,
                sent_ms: None,
                done: 0,
            });
            self.restart_step(q, events);
        }
    }

    /// Starts copying the next fragment, or reports the node copied.
    fn restart_step(&mut self, q: &mut VecDeque<BlockSignal>, events: &mut Vec<DihEvent>) {
        loop {
            let Some(r) = self.restart.as_mut() else {
                return;
            };
            if r.current.is_some() {
                return;
            }
            let node = r.node;
            let next = match r.plan.pop_front() {
                Some(k) => k,
                None => {
                    // Tables created during the restart have fragments here
                    // that are not copied yet.
                    let missing: Vec<FragKey> = self
                        .tables
                        .iter()
                        .flat_map(|(&id, t)| t.fragments_on(node).into_iter().map(move |f| (id, f)))
                        .filter(|k| self.starting.get(k) != Some(&FragReplicaState::Ready))
                        .collect();
                    let r = self.restart.as_mut().expect("checked");
                    if missing.is_empty() {
                        events.push(DihEvent::NodeCopied(node));
                        return;
                    }
                    r.plan.extend(missing);
                    continue;
                }
            };
            let (table, frag) = next;
            if self.starting.get(&next) == Some(&FragReplicaState::Ready) {
                continue;
            }
            let Some(primary) = self.frag(table, frag).and_then(|f| f.read).map(|c| c[0]) else {
                if self.tables.contains_key(&table) {
                    events.push(DihEvent::RestartFailed {
                        node,
                        why: format!(
                            "fragment {frag} of table {table} has no live replica to copy from"
                        ),
                    });
                    self.restart = None;
                    return;
                }
                continue;
            };
            let _ = primary;
            // The starting node hears first: once others route writes to
            // it, it must know the fragment is being copied (a write that
            // reached it earlier would be dropped as from a stranger, or
            // refused for its route). Everyone else hears once it confirms.
            let v = self.dist_version + 1;
            self.dist_version = v;
            q.push_back(BlockSignal::from(ClusterSignal::FragState {
                to: node,
                dist_version: v,
                table,
                frag,
                node,
                state: FragReplicaState::Copying,
            }));
            let r = self.restart.as_mut().expect("checked");
            r.current = Some(next);
            r.awaiting_conf = Some((v, node));
            r.sent_ms = None;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::Member;
    use shoal_types::{ColumnDef, ColumnType};

    fn table(groups: Vec<Vec<u16>>) -> TableDef {
        let mut def = TableDef::new(
            "t",
            vec![
                ColumnDef::new("k", ColumnType::Int { unsigned: true }),
                ColumnDef::new("v", ColumnType::Int { unsigned: true }),
            ],
            &["k"],
        )
        .unwrap();
        def.id = TableId(1);
        def.distribution = Some(DistributionSpec {
            version: 1,
            node_groups: groups,
            fragments_per_group: 2,
        });
        def
    }

    fn member(node: u16, started: bool) -> Member {
        Member {
            node,
            incarnation: 1,
            started,
        }
    }

    fn view(number: u64, dist_version: u32, members: Vec<Member>) -> View {
        View {
            number,
            dist_version,
            members,
            history: 0,
        }
    }

    #[test]
    fn primaries_move_to_survivors_and_back() {
        let mut d = Dih::new(1);
        d.view_changed(&view(1, 1, vec![member(1, true), member(2, true)]));
        d.create_table(&table(vec![vec![1, 2]]));
        let f0 = d.frag(TableId(1), 0).unwrap().clone();
        let f1 = d.frag(TableId(1), 1).unwrap().clone();
        assert_eq!(&*f0.write.unwrap(), &[1, 2]);
        assert_eq!(&*f1.write.unwrap(), &[2, 1]);
        // Node 2 fails: fragment 1's primary moves to node 1.
        d.view_changed(&view(2, 2, vec![member(1, true)]));
        let g0 = d.frag(TableId(1), 0).unwrap();
        let g1 = d.frag(TableId(1), 1).unwrap();
        assert_eq!(&*g1.write.unwrap(), &[1]);
        assert_eq!(&*g1.read.unwrap(), &[1]);
        assert_eq!(g1.version, 2);
        assert_eq!(&*g0.write.unwrap(), &[1]);
        // Node 2 comes back, not started: not in any route until copied.
        d.view_changed(&view(3, 3, vec![member(1, true), member(2, false)]));
        assert_eq!(&*d.frag(TableId(1), 1).unwrap().write.unwrap(), &[1]);
        let mut q = VecDeque::new();
        let mut events = Vec::new();
        d.president_tick(0, true, &mut q, &mut events);
        // Node 2 hears first that fragment 0 is to be copied; nobody routes
        // writes to it before it confirms.
        assert!(matches!(
            q.pop_front().as_ref().and_then(BlockSignal::as_cluster),
            Some(ClusterSignal::FragState {
                to: 2,
                frag: 0,
                node: 2,
                ..
            })
        ));
        assert!(q.is_empty());
        assert!(!d.is_copying(2, TableId(1), 0));
        assert_eq!(&*d.frag(TableId(1), 0).unwrap().write.unwrap(), &[1]);
        // Once it confirms, everyone hears, writes reach node 2 last, and
        // the copy starts.
        let v = d.dist_version();
        d.handle(
            2,
            ClusterSignal::FragStateConf {
                to: 1,
                dist_version: v,
                since: 0,
            },
            &mut q,
            &mut events,
        );
        assert!(d.is_copying(2, TableId(1), 0));
        assert_eq!(&*d.frag(TableId(1), 0).unwrap().write.unwrap(), &[1, 2]);
        assert_eq!(d.frag(TableId(1), 0).unwrap().read.unwrap()[0], 1);
        assert!(q.iter().any(|s| matches!(
            s.as_cluster(),
            Some(ClusterSignal::CopyFragReq {
                to: 1,
                target: 2,
                frag: 0,
                ..
            })
        )));
        // Both fragments copied.
        for frag in [0, 1] {
            if frag == 1 {
                let v = d.dist_version();
                d.handle(
                    2,
                    ClusterSignal::FragStateConf {
                        to: 1,
                        dist_version: v,
                        since: 0,
                    },
                    &mut q,
                    &mut events,
                );
            }
            d.handle(
                2,
                ClusterSignal::CopyFragConf {
                    to: 1,
                    table: TableId(1),
                    frag,
                    node: 2,
                    rows: 10,
                    bytes: 100,
                },
                &mut q,
                &mut events,
            );
        }
        assert!(events.contains(&DihEvent::NodeCopied(2)));
        // Node 2 is ready for both, but primary of fragment 1 only once started.
        assert_eq!(&*d.frag(TableId(1), 1).unwrap().write.unwrap(), &[1, 2]);
        d.view_changed(&view(4, 9, vec![member(1, true), member(2, true)]));
        assert_eq!(&*d.frag(TableId(1), 1).unwrap().write.unwrap(), &[2, 1]);
        assert_eq!(d.frag(TableId(1), 1).unwrap().version, 9);
        assert_eq!(d.frag(TableId(1), 0).unwrap().version, 9, "every fragment");
    }

    /// Node 1, the president, and node 2, a member not started yet, both
    /// with one table of two fragments replicated on both.
    fn president_and_starting() -> (Dih, Dih) {
        let mut president = Dih::new(1);
        let mut starting = Dih::new(2);
        let v3 = view(3, 3, vec![member(1, true), member(2, false)]);
        for d in [&mut president, &mut starting] {
            d.view_changed(&v3);
            d.create_table(&table(vec![vec![1, 2]]));
        }
        (president, starting)
    }

    /// The starting node hears of a copy one version before the others;
    /// once everyone has heard, every member routes the fragment at the
    /// same version (writes reach the copying replica and are taken).
    #[test]
    fn every_member_agrees_on_a_copied_fragments_version() {
        let (mut president, mut starting) = president_and_starting();
        let mut q = VecDeque::new();
        let mut events = Vec::new();
        president.president_tick(0, true, &mut q, &mut events);
        let deliver = |to: &mut Dih, from: u16, q: &mut VecDeque<BlockSignal>| {
            let mut back = VecDeque::new();
            while let Some(BlockSignal::Cluster(c)) = q.pop_front() {
                if c.to() == to.own {
                    to.handle(from, *c, &mut back, &mut Vec::new());
                }
            }
            back
        };
        // The president tells node 2 only; node 2 confirms.
        let mut confs = deliver(&mut starting, 1, &mut q);
        assert!(starting.is_copying(2, TableId(1), 0));
        let mut events = Vec::new();
        while let Some(BlockSignal::Cluster(c)) = confs.pop_front() {
            president.handle(2, *c, &mut q, &mut events);
        }
        // Now everyone hears, node 2 again at the newer version.
        let _ = deliver(&mut starting, 1, &mut q);
        let p = president.frag(TableId(1), 0).unwrap();
        let s = starting.frag(TableId(1), 0).unwrap();
        assert_eq!(&*p.write.unwrap(), &[1, 2]);
        assert_eq!(p.write, s.write);
        assert_eq!(
            p.version, s.version,
            "one version for the fragment on every member"
        );
    }

    /// A copying state the starting node never confirmed (it, or its
    /// confirmation, was lost) is sent again every second, the same
    /// version each time, until a confirmation comes; then not again.
    #[test]
    fn an_unconfirmed_copying_state_is_sent_again_until_confirmed() {
        let (mut president, mut starting) = president_and_starting();
        let mut q = VecDeque::new();
        let mut events = Vec::new();
        let states = |q: &mut VecDeque<BlockSignal>| -> Vec<ClusterSignal> {
            q.drain(..)
                .filter_map(|s| match s {
                    BlockSignal::Cluster(c) if matches!(*c, ClusterSignal::FragState { .. }) => {
                        Some(*c)
                    }
                    _ => None,
                })
                .collect()
        };
        president.president_tick(0, true, &mut q, &mut events);
        let first = states(&mut q);
        assert_eq!(first.len(), 1, "{first:?}");
        // Lost. The next tick takes the time; a second later it goes again.
        president.president_tick(10, true, &mut q, &mut events);
        president.president_tick(500, true, &mut q, &mut events);
        assert!(states(&mut q).is_empty(), "not before a second");
        president.president_tick(1_010, true, &mut q, &mut events);
        let again = states(&mut q);
        assert_eq!(again, first, "the same state at the same version");
        // Delivered twice (a late first and the repeat): confirmed twice,
        // and the president goes on once.
        let mut confs = VecDeque::new();
        for c in first.into_iter().chain(again) {
            starting.handle(1, c, &mut confs, &mut Vec::new());
        }
        assert_eq!(confs.len(), 2);
        while let Some(BlockSignal::Cluster(c)) = confs.pop_front() {
            president.handle(2, *c, &mut q, &mut events);
        }
        assert!(starting.is_copying(2, TableId(1), 0));
        q.clear();
        president.president_tick(5_000, true, &mut q, &mut events);
        assert!(states(&mut q).is_empty(), "confirmed: not sent again");
    }
}
