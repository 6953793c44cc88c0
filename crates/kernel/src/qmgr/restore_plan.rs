//! Which epoch a cluster formed from scratch restores, and which of the
//! nodes forming it can: the newest epoch every node group holds whole on
//! some node (so no transaction is half there), never older than an epoch
//! any node recorded as durable (a cluster that would lose durable
//! transactions does not form; it waits for the nodes holding them).

use crate::signal::FilesState;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestorePlan {
    /// Restore `epoch`; `members` hold it whole, the others (their files
    /// are older) join afterwards and copy their rows. `history`: the
    /// history of the files (None: none known, a new one begins).
    Restore {
        epoch: u64,
        members: BTreeSet<u16>,
        history: Option<u32>,
    },
    /// Durable data would be lost: say why, and wait.
    Wait(String),
}

/// Plans the restore of a cluster formed by `nodes`, which cover every
/// node group, from what each node's files hold (a node not in `files`
/// holds nothing).
pub fn plan(
    nodes: &BTreeSet<u16>,
    node_groups: &[Vec<u16>],
    files: &BTreeMap<u16, FilesState>,
) -> RestorePlan {
    let of = |n: u16| files.get(&n).copied().unwrap_or_default();
    // Files of two histories: the cluster started again empty (`--initial`)
    // while some nodes were down; their epochs are not comparable, and
    // which rows are wanted is the operator's call.
    let mut histories: BTreeMap<u32, Vec<u16>> = BTreeMap::new();
    for &n in nodes {
        let f = of(n);
        if f.history != 0 {
            histories.entry(f.history).or_default().push(n);
        }
    }
    if histories.len() > 1 {
        let sides: Vec<String> = histories
            .values()
            .map(|ns| {
                let durable = ns.iter().map(|&n| of(n).durable).max().unwrap_or(0);
                format!("{ns:?} (durable epoch {durable})")
            })
            .collect();
        return RestorePlan::Wait(format!(
            "data nodes hold files of different clusters: {} — the cluster was started empty (--initial) while some of them were down; start the data nodes whose rows are not wanted with --initial",
            sides.join(" and ")
        ));
    }
    let history = histories.keys().next().copied();
    let durable = nodes.iter().map(|&n| of(n).durable).max().unwrap_or(0);
    // A node can restore an epoch in its log's range (nothing to restore
    // is epoch 0, which every node can).
    let can = |n: u16, epoch: u64| {
        let f = of(n);
        f.restorable_from <= epoch && epoch <= f.restorable
    };
    let covered = |epoch: u64| {
        node_groups
            .iter()
            .all(|g| g.iter().any(|&n| nodes.contains(&n) && can(n, epoch)))
    };
    // The newest epoch each node group can restore on some node.
    let mut candidates: Vec<u64> = nodes.iter().map(|&n| of(n).restorable).collect();
    candidates.push(0);
    candidates.sort_unstable_by(|a, b| b.cmp(a));
    let Some(epoch) = candidates.into_iter().find(|&e| covered(e)) else {
        return RestorePlan::Wait(
            "no epoch is one every node group can restore on a node present (a node's log restores nothing while it copies its rows after a restart): start the other data nodes, or start the cluster empty with --initial".into(),
        );
    };
    if epoch < durable {
        let short: Vec<&Vec<u16>> = node_groups
            .iter()
            .filter(|g| !g.iter().any(|&n| nodes.contains(&n) && can(n, durable)))
            .collect();
        return RestorePlan::Wait(format!(
            "epoch {durable} is durable, but no node present of node group(s) {short:?} holds it whole: start the data nodes holding it, or start the cluster empty with --initial"
        ));
    }
    let members = nodes.iter().copied().filter(|&n| can(n, epoch)).collect();
    RestorePlan::Restore {
        epoch,
        members,
        history,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(u16, u64, u64)]) -> BTreeMap<u16, FilesState> {
        list.iter()
            .map(|&(n, durable, restorable)| {
                (
                    n,
                    FilesState {
                        durable,
                        restorable,
                        restorable_from: 0,
                        history: 0,
                    },
                )
            })
            .collect()
    }

    fn set(list: &[u16]) -> BTreeSet<u16> {
        list.iter().copied().collect()
    }

    #[test]
    fn files_of_two_cluster_histories_do_not_form_one() {
        let groups = vec![vec![1, 2], vec![3]];
        let mut f = files(&[(1, 50, 50), (2, 1000, 1000), (3, 50, 50)]);
        f.get_mut(&1).expect("listed").history = 7;
        f.get_mut(&3).expect("listed").history = 7;
        f.get_mut(&2).expect("listed").history = 9;
        let p = plan(&set(&[1, 2, 3]), &groups, &f);
        assert!(
            matches!(&p, RestorePlan::Wait(why) if why.contains("different clusters") && why.contains("[2] (durable epoch 1000)")),
            "{p:?}"
        );
        // Without node 2: history 7, carried into the plan; a node of
        // unknown history (files from before histories) goes along.
        f.get_mut(&2).expect("listed").history = 0;
        f.get_mut(&2).expect("listed").durable = 40;
        f.get_mut(&2).expect("listed").restorable = 40;
        let p = plan(&set(&[1, 2, 3]), &groups, &f);
        assert!(
            matches!(
                &p,
                RestorePlan::Restore {
                    epoch: 50,
                    history: Some(7),
                    ..
                }
            ),
            "{p:?}"
        );
    }

    #[test]
    fn an_empty_cluster_restores_nothing_with_everyone() {
        let groups = vec![vec![1, 2], vec![3, 4]];
        let p = plan(&set(&[1, 2, 3, 4]), &groups, &BTreeMap::new());
        assert_eq!(
            p,
            RestorePlan::Restore {
                epoch: 0,
                members: set(&[1, 2, 3, 4]),
                history: None
            }
        );
    }

    #[test]
    fn the_newest_epoch_every_group_holds_and_only_nodes_holding_it() {
        let groups = vec![vec![1, 2], vec![3, 4]];
        // Group 1's best is 9, group 2's 8: restore 8; node 2 (7) copies.
        let f = files(&[(1, 6, 9), (2, 6, 7), (3, 6, 8), (4, 6, 8)]);
        let p = plan(&set(&[1, 2, 3, 4]), &groups, &f);
        assert_eq!(
            p,
            RestorePlan::Restore {
                epoch: 8,
                members: set(&[1, 3, 4]),
                history: None
            }
        );
    }

    #[test]
    fn a_node_whose_log_starts_later_is_left_out() {
        let groups = vec![vec![1, 2]];
        let mut f = files(&[(1, 5, 6), (2, 5, 9)]);
        f.get_mut(&2).expect("listed").restorable_from = 8;
        // Node 2 restores 8..=9 only: the group's newest epoch is 9.
        let p = plan(&set(&[1, 2]), &groups, &f);
        assert_eq!(
            p,
            RestorePlan::Restore {
                epoch: 9,
                members: set(&[2]),
                history: None
            }
        );
        // With a second group that holds only 6, epoch 6: node 2 cannot.
        let groups = vec![vec![1, 2], vec![3]];
        f.insert(
            3,
            FilesState {
                durable: 5,
                restorable: 6,
                restorable_from: 0,
                history: 0,
            },
        );
        let p = plan(&set(&[1, 2, 3]), &groups, &f);
        assert_eq!(
            p,
            RestorePlan::Restore {
                epoch: 6,
                members: set(&[1, 3]),
                history: None
            }
        );
    }

    #[test]
    fn a_durable_epoch_no_group_member_holds_makes_it_wait() {
        let groups = vec![vec![1, 2], vec![3, 4]];
        // Node 4, which held epoch 10 of group 2, is missing.
        let f = files(&[(1, 10, 10), (3, 9, 9), (4, 10, 10)]);
        match plan(&set(&[1, 3]), &groups, &f) {
            RestorePlan::Wait(why) => assert!(why.contains("--initial"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
