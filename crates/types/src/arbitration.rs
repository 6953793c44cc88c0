//! Who survives when data nodes lose sight of each other (NDB's
//! `Qmgr::handleArbitCheck`), and the arbitrator that breaks a tie.
//!
//! Both are pure: the president's membership block applies
//! [`survival`] to the nodes of its new view; mgmd (and the simulator)
//! keep an [`Arbitrator`] and answer its requests.
//!
//! The rules, in order, over *started* data nodes (a node still copying
//! its fragments holds no data another replica lacks, so it counts for
//! nothing):
//! 1. A node group with no survivor: its data is gone, shut down.
//! 2. A node group all of whose previously live nodes survive: the other
//!    side lacks that group entirely (rule 1 ends it), so survive.
//! 3. More than half of the previously live nodes survive: survive; fewer
//!    than half: shut down (the other side may hold the majority).
//! 4. Exactly half: ask the arbitrator, which says yes to the first side
//!    that asks and no to the other. No answer means shut down.
//!
//! Two disjoint sides can never both survive: at most one holds more than
//! half, rule 2 holds for a side only if rule 1 ends the other, and the
//! arbitrator grants one side per view.

use std::collections::BTreeSet;

/// What a side of a split should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Survive,
    /// Shut down; the string says why (for the log).
    ShutDown(String),
    /// Exactly half survives: only the arbitrator may let it go on.
    AskArbitrator,
}

/// Applies the survival rules. `previous` are the started nodes of the
/// last agreed view, `survivors` the started nodes of the proposed one,
/// `node_groups` the configured groups.
pub fn survival(
    previous: &BTreeSet<u16>,
    survivors: &BTreeSet<u16>,
    node_groups: &[Vec<u16>],
) -> Verdict {
    for (g, group) in node_groups.iter().enumerate() {
        if !group.iter().any(|n| survivors.contains(n)) {
            return Verdict::ShutDown(format!(
                "node group {g} ({group:?}) has no live started node"
            ));
        }
    }
    for group in node_groups {
        let was_live: Vec<u16> = group
            .iter()
            .copied()
            .filter(|n| previous.contains(n))
            .collect();
        if !was_live.is_empty() && was_live.iter().all(|n| survivors.contains(n)) {
            return Verdict::Survive;
        }
    }
    let (alive, before) = (survivors.len() * 2, previous.len());
    if alive > before {
        Verdict::Survive
    } else if alive < before {
        Verdict::ShutDown(format!(
            "{} of {} started data nodes survive, fewer than half",
            survivors.len(),
            previous.len()
        ))
    } else {
        Verdict::AskArbitrator
    }
}

/// The view an arbitration request names when it asks whether nodes that
/// found no running cluster may form a new one (an initial start, of
/// every configured node or, after the partial timeout, of some). Views
/// of a running cluster are never 0.
pub const FORM_VIEW: u64 = 0;

/// The arbitrator's answer to a partial initial start of `forming`: it may
/// go on only if no data node outside it is known to run in a cluster
/// (`started`: the data nodes the arbitrator hears from that report they
/// are in a formed cluster, started or still restoring or copying).
/// Otherwise a cluster runs on the other side of a split, and a second
/// one beside it would be a split brain. `Err` lists those nodes outside.
pub fn may_form(forming: &BTreeSet<u16>, started: &BTreeSet<u16>) -> Result<(), Vec<u16>> {
    let outside: Vec<u16> = started.difference(forming).copied().collect();
    if outside.is_empty() {
        Ok(())
    } else {
        Err(outside)
    }
}

/// How long an initial start the arbitrator allowed keeps every other
/// one out, and how long an arbitrator that just started refuses partial
/// ones: long enough for granted nodes to form their cluster and
/// report themselves in it, and for the data nodes of a running cluster
/// to reattach to a restarted arbitrator and say so (a failure-detection
/// time plus an arbitration round). After it, the nodes in a cluster
/// speak for themselves ([`may_form`]).
pub fn formation_lease_ms(heartbeat_interval_ms: u64, arbitration_timeout_ms: u64) -> u64 {
    4 * heartbeat_interval_ms + arbitration_timeout_ms
}

/// Why the arbitrator refused an initial start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormRefusal {
    /// These data nodes (outside it, for a partial start) are in a formed
    /// cluster (started, or restoring or copying their rows): a cluster
    /// runs there.
    Started(Vec<u16>),
    /// Another start (these nodes) was allowed moments ago; the two
    /// groups may share nodes, and only one may form.
    OtherForming(Vec<u16>),
    /// The arbitrator itself started this many ms ago: the nodes of a
    /// running cluster may not have reattached yet.
    JustStarted(u64),
}

impl std::fmt::Display for FormRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormRefusal::Started(n) => write!(
                f,
                "data nodes {n:?} are in a cluster (started, or restoring or copying their rows): a cluster runs"
            ),
            FormRefusal::OtherForming(n) => {
                write!(f, "a start of data nodes {n:?} was allowed just before")
            }
            FormRefusal::JustStarted(ms) => write!(
                f,
                "the arbitrator started {ms} ms ago; running data nodes may not have reattached yet"
            ),
        }
    }
}

/// The arbitrator's memory of initial starts: one at a time, and no
/// partial one right after the arbitrator (re)started (it does not know
/// what it allowed before). Two groups of a split, each a majority of the
/// configured nodes, share nodes; each would otherwise be allowed to form
/// a cluster of its own with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormationGate {
    started_ms: u64,
    /// See [`formation_lease_ms`].
    lease_ms: u64,
    /// The latest start allowed, and until when it keeps others out.
    allowed: Option<(BTreeSet<u16>, u64)>,
}

impl FormationGate {
    /// A gate for an arbitrator that started at `now_ms`.
    pub fn new(now_ms: u64, lease_ms: u64) -> FormationGate {
        FormationGate {
            started_ms: now_ms,
            lease_ms,
            allowed: None,
        }
    }

    /// Answers an initial start of `forming` (`started`: the data nodes
    /// the arbitrator hears from that report they are in a formed cluster,
    /// started or still restoring or copying;
    /// `registered`: those it hears from at all; `everyone`: `forming` is
    /// every configured data node). The group allowed last may ask again
    /// (a retry) while its lease runs.
    ///
    /// A start of every node asks too: its former took the others for
    /// fresh from what they last said, and they may have formed a
    /// partial cluster since (its answers still on the way). So it is
    /// refused while another group's lease runs or any node is in a
    /// cluster, and its own lease keeps partial starts out. Right after the
    /// arbitrator started (when `shoal up` starts everything at once) it
    /// is allowed only if every node in it already registered here: a
    /// node of a cluster formed before the restart may not have
    /// reattached yet.
    pub fn request(
        &mut self,
        now_ms: u64,
        forming: &BTreeSet<u16>,
        started: &BTreeSet<u16>,
        registered: &BTreeSet<u16>,
        everyone: bool,
    ) -> Result<(), FormRefusal> {
        if everyone {
            if !started.is_empty() {
                return Err(FormRefusal::Started(started.iter().copied().collect()));
            }
            let up_ms = now_ms.saturating_sub(self.started_ms);
            if up_ms < self.lease_ms && !forming.is_subset(registered) {
                return Err(FormRefusal::JustStarted(up_ms));
            }
        } else {
            may_form(forming, started).map_err(FormRefusal::Started)?;
            let up_ms = now_ms.saturating_sub(self.started_ms);
            if up_ms < self.lease_ms {
                return Err(FormRefusal::JustStarted(up_ms));
            }
        }
        if let Some((nodes, until)) = &self.allowed {
            if now_ms < *until && nodes != forming {
                return Err(FormRefusal::OtherForming(nodes.iter().copied().collect()));
            }
        }
        self.allowed = Some((forming.clone(), now_ms + self.lease_ms));
        Ok(())
    }
}

/// A survival grant the arbitrator gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The view the granted side had committed when it asked.
    pub view: u64,
    /// The newest view the granted side knew of (committed or only
    /// proposed): every split up to it is the same split.
    pub newest: u64,
    pub survivors: BTreeSet<u16>,
}

/// The arbitrator (mgmd): grants survival to the first side of a split
/// that asks, and refuses every other side of the same split.
///
/// A request names the last view its side committed and the newest view
/// it knows of, committed or only proposed (a president's proposal that
/// some member took may have been committed by the other side, or never
/// by anyone), and the side's survivors. The two sides of one split may
/// name different views — one side committed a view the other only took
/// as a proposal, or a president's own proposal never left its side —
/// but each names a committed view no newer than the newest view the
/// other knows of. So: a request whose committed view is not newer than
/// the granted side's newest belongs to the split already decided, and
/// wins only if its survivors are a subset of the granted side (that side
/// asking again, maybe after losing more nodes); a request whose committed
/// view is newer comes after the split healed (views only advance through
/// the surviving side) and is a new split: the first such request wins.
/// The grant must outlive the arbitrator's restarts (mgmd persists it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Arbitrator {
    granted: Option<Grant>,
}

impl Arbitrator {
    /// An arbitrator that remembers `granted` (loaded from disk).
    pub fn with_grant(granted: Option<Grant>) -> Arbitrator {
        Arbitrator { granted }
    }

    /// The latest grant (to persist before answering).
    pub fn grant(&self) -> Option<&Grant> {
        self.granted.as_ref()
    }

    /// Answers a side's request (`view`: its last committed view;
    /// `newest`: the newest view it knows of): `true` lets it survive.
    pub fn request(&mut self, view: u64, newest: u64, survivors: &BTreeSet<u16>) -> bool {
        match &self.granted {
            Some(g) if view <= g.newest => survivors.is_subset(&g.survivors),
            _ => {
                self.granted = Some(Grant {
                    view,
                    newest: newest.max(view),
                    survivors: survivors.clone(),
                });
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(nodes: &[u16]) -> BTreeSet<u16> {
        nodes.iter().copied().collect()
    }

    #[test]
    fn the_rules_in_order() {
        let groups = vec![vec![1, 2], vec![3, 4]];
        let all = set(&[1, 2, 3, 4]);
        // One node of four lost: majority.
        assert_eq!(survival(&all, &set(&[1, 2, 3]), &groups), Verdict::Survive);
        // A whole group lost.
        assert!(matches!(
            survival(&all, &set(&[1, 2]), &groups),
            Verdict::ShutDown(_)
        ));
        // One node of each group on each side: a tie.
        assert_eq!(
            survival(&all, &set(&[1, 3]), &groups),
            Verdict::AskArbitrator
        );
        // Minority.
        assert!(matches!(
            survival(&all, &set(&[1]), &groups),
            Verdict::ShutDown(_)
        ));
        // Node 1 was already gone: group 0's live nodes ({2}) all survive,
        // so the other side has none of group 0.
        assert_eq!(
            survival(&set(&[2, 3, 4]), &set(&[2, 4]), &groups),
            Verdict::Survive
        );
        // Two nodes, one group: losing one is a tie.
        let one = vec![vec![1, 2]];
        assert_eq!(
            survival(&set(&[1, 2]), &set(&[2]), &one),
            Verdict::AskArbitrator
        );
        // One replica per group: every node is a group of its own.
        let singles = vec![vec![1], vec![2]];
        assert!(matches!(
            survival(&set(&[1, 2]), &set(&[1]), &singles),
            Verdict::ShutDown(_)
        ));
    }

    #[test]
    fn a_partial_start_waits_while_a_cluster_runs_elsewhere() {
        assert_eq!(may_form(&set(&[1, 2]), &set(&[])), Ok(()));
        assert_eq!(may_form(&set(&[1, 2]), &set(&[1])), Ok(()));
        assert_eq!(may_form(&set(&[1, 2]), &set(&[3])), Err(vec![3]));
        assert_eq!(may_form(&set(&[1]), &set(&[2, 3])), Err(vec![2, 3]));
    }

    #[test]
    fn one_partial_start_at_a_time_and_none_right_after_a_restart() {
        const LEASE: u64 = 10_000;
        let mut g = FormationGate::new(1_000, LEASE);
        let (a, b) = (set(&[1, 3, 4]), set(&[2, 3, 4]));
        let none = set(&[]);
        assert_eq!(
            g.request(2_000, &a, &none, &a, false),
            Err(FormRefusal::JustStarted(1_000))
        );
        let t = 1_000 + LEASE;
        assert_eq!(g.request(t, &a, &none, &a, false), Ok(()));
        assert_eq!(
            g.request(t + 1, &b, &none, &b, false),
            Err(FormRefusal::OtherForming(vec![1, 3, 4])),
            "two groups sharing nodes 3 and 4"
        );
        assert_eq!(g.request(t + 2, &a, &none, &a, false), Ok(()), "a retry");
        assert_eq!(
            g.request(t + 3, &b, &set(&[1]), &b, false),
            Err(FormRefusal::Started(vec![1]))
        );
        // The first group never started: after its lease another may form.
        assert_eq!(g.request(t + 2 + LEASE, &b, &none, &b, false), Ok(()));
    }

    #[test]
    fn a_start_of_every_node_waits_for_a_partial_one_and_keeps_others_out() {
        const LEASE: u64 = 10_000;
        let all = set(&[1, 2, 3, 4]);
        let none = set(&[]);
        // Right after the arbitrator started: allowed once every node
        // registered (`shoal up` starting everything at once), not while
        // one may belong to a cluster that has not reattached yet; and it
        // keeps a partial one out.
        let mut g = FormationGate::new(1_000, LEASE);
        assert_eq!(
            g.request(1_200, &all, &none, &set(&[1, 2, 3]), true),
            Err(FormRefusal::JustStarted(200))
        );
        assert_eq!(g.request(1_500, &all, &none, &all, true), Ok(()));
        let t = 1_000 + LEASE;
        assert_eq!(
            g.request(t, &set(&[2, 3, 4]), &none, &all, false),
            Err(FormRefusal::OtherForming(vec![1, 2, 3, 4]))
        );
        // A partial start allowed first: the start of every node, whose
        // former took the others for fresh a moment ago, is refused
        // while it may be forming, and once its nodes are started.
        let mut g = FormationGate::new(0, LEASE);
        let (partial, t) = (set(&[2, 3, 4]), 2 * LEASE);
        assert_eq!(g.request(t, &partial, &none, &all, false), Ok(()));
        assert_eq!(
            g.request(t + 30, &all, &none, &all, true),
            Err(FormRefusal::OtherForming(vec![2, 3, 4]))
        );
        assert_eq!(
            g.request(t + 2 * LEASE, &all, &partial, &all, true),
            Err(FormRefusal::Started(vec![2, 3, 4]))
        );
        // Nobody started and no lease: allowed.
        assert_eq!(g.request(t + 3 * LEASE, &all, &none, &all, true), Ok(()));
    }

    #[test]
    fn the_arbitrator_grants_one_side_per_view() {
        let mut a = Arbitrator::default();
        assert!(a.request(7, 7, &set(&[1, 3])));
        assert!(!a.request(7, 7, &set(&[2, 4])), "the other side of view 7");
        assert!(a.request(7, 7, &set(&[1])), "the winning side, smaller");
        assert!(!a.request(6, 7, &set(&[2])), "a side that missed view 7");
        assert!(a.request(9, 9, &set(&[3])), "a later split");
        assert_eq!(a.grant().unwrap().view, 9);
        let restored = Arbitrator::with_grant(a.grant().cloned());
        assert_eq!(restored, a);
    }

    #[test]
    fn sides_that_name_different_views_of_one_split() {
        // Side {2} committed view 35 only; side {3}'s president had
        // proposed 36 (never committed, {2} never took it).
        let mut a = Arbitrator::default();
        assert!(a.request(35, 35, &set(&[2])));
        assert!(
            !a.request(35, 36, &set(&[3])),
            "the other side, naming its own proposal"
        );
        // The other order: {3} asks first.
        let mut a = Arbitrator::default();
        assert!(a.request(35, 36, &set(&[3])));
        assert!(!a.request(35, 35, &set(&[2])));
        // Side {1, 3} committed 40, which side {2, 4} had only taken as a
        // proposal (its committed view is still 39).
        let mut a = Arbitrator::default();
        assert!(a.request(39, 40, &set(&[2, 4])));
        assert!(!a.request(40, 40, &set(&[1, 3])));
        let mut a = Arbitrator::default();
        assert!(a.request(40, 40, &set(&[1, 3])));
        assert!(!a.request(39, 40, &set(&[2, 4])));
        // Views past the newest one known: a new split.
        assert!(a.request(41, 41, &set(&[2, 4])));
    }

    /// Two disjoint sides of any split never both survive.
    #[test]
    fn no_two_disjoint_sides_survive() {
        let groups = vec![vec![1, 2], vec![3, 4], vec![5, 6]];
        let all: Vec<u16> = (1..=6).collect();
        for mask in 0u32..(1 << 6) {
            let previous: BTreeSet<u16> = all
                .iter()
                .copied()
                .filter(|n| mask & (1 << (n - 1)) != 0)
                .collect();
            // Every split of the previous nodes into two sides (and the
            // nodes lost in between).
            for side in 0u32..(1 << 6) {
                for lost in 0u32..(1 << 6) {
                    let a: BTreeSet<u16> = previous
                        .iter()
                        .copied()
                        .filter(|n| side & (1 << (n - 1)) != 0 && lost & (1 << (n - 1)) == 0)
                        .collect();
                    let b: BTreeSet<u16> = previous
                        .iter()
                        .copied()
                        .filter(|n| side & (1 << (n - 1)) == 0 && lost & (1 << (n - 1)) == 0)
                        .collect();
                    let mut arbitrator = Arbitrator::default();
                    let mut decide = |s: &BTreeSet<u16>| match survival(&previous, s, &groups) {
                        Verdict::Survive => true,
                        Verdict::ShutDown(_) => false,
                        Verdict::AskArbitrator => arbitrator.request(1, 1, s),
                    };
                    let (sa, sb) = (decide(&a), decide(&b));
                    assert!(
                        !(sa && sb),
                        "previous {previous:?}: both {a:?} and {b:?} survive"
                    );
                }
            }
        }
    }
}
