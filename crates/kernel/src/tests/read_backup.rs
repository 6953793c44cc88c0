//! Tables read from any replica (read backup): a backup shows a commit
//! only once every replica knows of it, and shows it before the writer
//! hears `Committed`.

use super::{conf, Harness};
use crate::signal::BlockSignal;
use crate::{DataNode, Faults, KernelConfig, Output};
use shoal_types::{ErrorCode, TransId, Value};
use shoal_wire::{ExecType, LockMode, OpType, Signal, TcKeyReq, TransState};
use std::collections::VecDeque;

/// Two data nodes with two replicas of a read-backup table's one
/// fragment (node 1 its primary, node 2 its backup), formed into a
/// cluster.
fn two_replicas_read_backup(faults: Faults) -> Vec<DataNode> {
    two_replicas_read_backup_in(1, faults)
}

/// The same with `fragments` fragments (their primaries alternate
/// between the two nodes).
fn two_replicas_read_backup_in(fragments: u32, faults: Faults) -> Vec<DataNode> {
    let mut def = super::one_fragment_on_two_nodes(true);
    if let Some(d) = def.distribution.as_mut() {
        d.fragments_per_group = fragments;
    }
    let mut nodes = super::two_linked_nodes(Some(&def), faults);
    crate::testkit::form_cluster(&mut nodes, 0);
    nodes
}

/// Sends a one-request transaction to the coordinator on node 2.
fn send_to_node_2(nodes: &mut [DataNode], trans: u64, ops: Vec<shoal_wire::KeyOp>) -> Vec<Output> {
    let mut out = Vec::new();
    let req = TcKeyReq {
        trans: TransId(trans),
        request: 0,
        exec: ExecType::Commit,
        durable: false,
        ops,
    };
    nodes[1]
        .client_signal(0, 7, Signal::TcKeyReq(req), &mut out)
        .unwrap();
    out
}

/// Delivers node-to-node signals (node 2 sent those in `out`) until none
/// is left or `stop` picks one, which is returned undelivered; collects
/// what clients are sent.
fn run_until(
    nodes: &mut [DataNode],
    out: Vec<Output>,
    stop: &dyn Fn(&BlockSignal) -> bool,
) -> (Vec<Output>, Option<(u16, BlockSignal)>) {
    run_repeating(nodes, out, stop, &|_| false)
}

/// [`run_until`], delivering the signals `twice` picks twice (as a
/// network may).
fn run_repeating(
    nodes: &mut [DataNode],
    out: Vec<Output>,
    stop: &dyn Fn(&BlockSignal) -> bool,
    twice: &dyn Fn(&BlockSignal) -> bool,
) -> (Vec<Output>, Option<(u16, BlockSignal)>) {
    let mut client = Vec::new();
    let mut queue: VecDeque<(u16, BlockSignal)> = VecDeque::new();
    let mut produced = vec![(2u16, out)];
    loop {
        for (from, out) in produced.drain(..) {
            for o in out {
                match o {
                    Output::ToNode { signal, .. } => queue.push_back((from, signal)),
                    Output::Send { .. } => client.push(o),
                    _ => {}
                }
            }
        }
        let Some((from, sig)) = queue.pop_front() else {
            return (client, None);
        };
        if stop(&sig) {
            return (client, Some((from, sig)));
        }
        let to = sig.destination_node();
        let mut out = Vec::new();
        if twice(&sig) {
            nodes[to as usize - 1].node_signal(0, from, sig.clone(), &mut out);
        }
        nodes[to as usize - 1].node_signal(0, from, sig, &mut out);
        produced.push((to, out));
    }
}

/// What a committed read of key `k` on node 2 (its own replica, the
/// backup) returns: `v`, or None if the row is not there.
fn v_at_node_2(nodes: &mut [DataNode], h: &Harness, trans: u64, k: u32) -> Option<i64> {
    let mut op = h.read(k, LockMode::CommittedRead);
    op.flags = shoal_wire::OP_IGNORE_ERROR;
    let out = send_to_node_2(nodes, trans, vec![op]);
    assert!(
        !out.iter().any(|o| matches!(o, Output::ToNode { .. })),
        "a committed read of a read-backup table stays on its node: {out:?}"
    );
    v_of(h, &conf(&out))
}

/// `v` in a committed read's answer, or None if the row is not there.
fn v_of(h: &Harness, c: &shoal_wire::TcKeyConf) -> Option<i64> {
    if c.results[0].code == ErrorCode::TupleNotFound as u16 {
        return None;
    }
    let (attrs, _) = shoal_types::AttrSlice::parse(&c.results[0].data).unwrap();
    let (_, bytes) = attrs.iter().find(|(col, _)| *col == 1).unwrap();
    match shoal_types::value::decode_value(h.def.columns[1].ty, bytes.unwrap()) {
        Value::Int(v) => Some(v),
        other => panic!("v is {other:?}"),
    }
}

/// Inserts key 1 with v = 10 through node 2, then sends an update to
/// v = 20 coordinated by node 2 (which holds the backup) and runs it up
/// to the primaries' commit round, returned undelivered with its sender.
fn update_up_to_the_primaries_round(nodes: &mut [DataNode], h: &Harness) -> (u16, BlockSignal) {
    let out = send_to_node_2(nodes, 1, vec![h.op(OpType::Insert, 1, 10, "x")]);
    let (client, _) = run_until(nodes, out, &|_| false);
    assert_eq!(conf(&client).state, TransState::Committed);
    assert_eq!(v_at_node_2(nodes, h, 2, 1), Some(10));

    // The backups' round runs on node 2 itself; stop before the
    // primaries' round reaches node 1.
    let out = send_to_node_2(nodes, 3, vec![h.op(OpType::Update, 1, 20, "y")]);
    let primaries_round =
        |s: &BlockSignal| matches!(s, BlockSignal::CommitReq { release: true, .. });
    let (client, held) = run_until(nodes, out, &primaries_round);
    assert!(client.is_empty(), "no answer before the commit is whole");
    let backup = nodes[1].replica_transactions(2);
    assert_eq!(backup.len(), 1, "{backup:?}");
    assert!(backup[0].committed, "the backup knows of the decision");
    held.expect("the primaries' round")
}

/// Runs an update of key 1 from 10 to 20, coordinated by node 2 (which
/// holds the backup), up to the primaries' commit round; returns what
/// node 2's replica shows then, and after the commit finished.
fn update_seen_at_the_backup(faults: Faults) -> (Option<i64>, Option<i64>) {
    let mut nodes = two_replicas_read_backup(faults);
    let h = Harness::new(KernelConfig::default());
    let (from, held) = update_up_to_the_primaries_round(&mut nodes, &h);
    let during = v_at_node_2(&mut nodes, &h, 4, 1);

    // The primary commits; complete applies the change at the backup;
    // only then does the writer hear.
    let mut out = Vec::new();
    nodes[0].node_signal(0, from, held, &mut out);
    let client = deliver_all(&mut nodes, 1, out);
    assert_eq!(conf(&client).state, TransState::Committed);
    assert!(nodes[1].replica_transactions(2).is_empty());
    let after = v_at_node_2(&mut nodes, &h, 5, 1);
    (during, after)
}

/// Delivers what node `from` produced, and all that follows; returns
/// what clients are sent.
fn deliver_all(nodes: &mut [DataNode], from: u16, out: Vec<Output>) -> Vec<Output> {
    let out: Vec<(u16, Output)> = out.into_iter().map(|o| (from, o)).collect();
    crate::testkit::deliver(nodes, 0, out)
        .into_iter()
        .filter(|o| matches!(o, Output::Send { .. }))
        .collect()
}

#[test]
fn a_backup_shows_a_commit_only_once_every_replica_knows_of_it() {
    let (during, after) = update_seen_at_the_backup(Faults::default());
    assert_eq!(
        during,
        Some(10),
        "the backup showed the update while the primary had not committed it"
    );
    assert_eq!(
        after,
        Some(20),
        "the backup never showed the committed update"
    );
}

/// The check above can fail: with the backups' round applying at once
/// (the protocol broken on purpose), node 2 shows the update early.
#[test]
fn backups_showing_a_commit_early_are_caught() {
    let (during, after) = update_seen_at_the_backup(Faults {
        backups_show_commit_early: true,
        ..Faults::default()
    });
    assert_eq!((during, after), (Some(20), Some(20)));
}

/// The bug this guards against, whole: node 2 coordinates the update and
/// holds the backup; it is cut off just after its own backup recorded
/// the decision, before the primaries' round reaches node 1. Node 1,
/// alone with the arbitrator's grant, takes node 2's transactions over:
/// no live replica committed the update, so it aborts it. Node 2's
/// readers must never have seen it. Returns what node 2 showed before it
/// learned it was out, and what node 1 shows after the takeover.
fn cut_off_coordinator(faults: Faults) -> (Option<i64>, Option<i64>) {
    let mut nodes = two_replicas_read_backup(faults);
    let h = Harness::new(KernelConfig::default());
    let _lost = update_up_to_the_primaries_round(&mut nodes, &h);
    let shown_by_the_cut_off_node = v_at_node_2(&mut nodes, &h, 4, 1);

    // Node 1 loses node 2 and asks the arbitrator (exactly half).
    let mut now_ms = 10_000;
    let mut out = Vec::new();
    nodes[0].peer_link_lost(now_ms, 2, &mut out);
    let asks = |out: &[Output]| out.iter().any(|o| matches!(o, Output::Arbitrate { .. }));
    let mut asked = asks(&out);
    for _ in 0..1000 {
        if asked {
            break;
        }
        now_ms += 10;
        let mut out = Vec::new();
        nodes[0].tick(now_ms, &mut out);
        asked = asks(&out);
    }
    assert!(asked, "node 1 never asked the arbitrator");
    let mut out = Vec::new();
    nodes[0].arbitration_result(now_ms, true, &mut out);
    for _ in 0..100 {
        now_ms += 10;
        nodes[0].tick(now_ms, &mut out);
    }
    assert!(
        nodes[0].replica_transactions(2).is_empty(),
        "the takeover settled node 2's transaction on node 1"
    );
    // Node 1's own committed read (its replica is the primary).
    let mut op = h.read(1, LockMode::CommittedRead);
    op.flags = shoal_wire::OP_IGNORE_ERROR;
    let req = TcKeyReq {
        trans: TransId(9),
        request: 0,
        exec: ExecType::Commit,
        durable: false,
        ops: vec![op],
    };
    let mut out = Vec::new();
    nodes[0]
        .client_signal(now_ms, 8, Signal::TcKeyReq(req), &mut out)
        .unwrap();
    (shown_by_the_cut_off_node, v_of(&h, &conf(&out)))
}

#[test]
fn a_cut_off_coordinator_never_shows_a_commit_the_survivors_abort() {
    let (cut_off, survivor) = cut_off_coordinator(Faults::default());
    assert_eq!(survivor, Some(10), "the survivor aborted the update");
    assert_eq!(
        cut_off,
        Some(10),
        "the cut-off coordinator showed an update the survivor aborted"
    );
    // Broken on purpose, the same run shows the anomaly.
    let (cut_off, survivor) = cut_off_coordinator(Faults {
        backups_show_commit_early: true,
        ..Faults::default()
    });
    assert_eq!((cut_off, survivor), (Some(20), Some(10)));
}

/// A replica whose operations of the transaction all failed holds
/// nothing of it: a commit round that only records the decision ends its
/// record there (no complete round is owed to it; found by sim seed
/// 5014, where such a record was kept forever).
#[test]
fn a_replica_holding_nothing_forgets_a_decided_transaction() {
    let mut nodes = two_replicas_read_backup_in(2, Faults::default());
    let h = Harness::new(KernelConfig::default());
    let route = nodes[0].dih().table(super::T).expect("the table");
    let primary_of = |k: u32| {
        let f = route.fragment_of(&h.key(k));
        route.frags[f as usize].write.expect("a route")[0]
    };
    let on_1 = (0..100)
        .find(|&k| primary_of(k) == 1)
        .expect("a key on node 1");
    let on_2 = (0..100)
        .find(|&k| primary_of(k) == 2)
        .expect("a key on node 2");
    let out = send_to_node_2(&mut nodes, 1, vec![h.op(OpType::Insert, on_2, 1, "a")]);
    let (client, _) = run_until(&mut nodes, out, &|_| false);
    assert_eq!(conf(&client).state, TransState::Committed);

    // Both operations fail at their primaries (errors ignored). The
    // first reaches node 1 twice: the repeat leaves a record there with
    // no row, marked failed. TC counts node 1 as a backup of the second's
    // fragment, which that operation never reached, so the backups'
    // round goes to node 1 — and may be the last round to reach it (the
    // primaries' round can be lost with its link, as in seed 5014).
    let mut missing = h.op(OpType::Update, on_1, 2, "b");
    missing.flags = shoal_wire::OP_IGNORE_ERROR;
    let mut existing = h.op(OpType::Insert, on_2, 3, "c");
    existing.flags = shoal_wire::OP_IGNORE_ERROR;
    let out = send_to_node_2(&mut nodes, 2, vec![missing, existing]);
    let to_node_1 =
        |s: &BlockSignal| matches!(s, BlockSignal::LqhKeyReq { .. }) && s.destination_node() == 1;
    let primaries_round =
        |s: &BlockSignal| matches!(s, BlockSignal::CommitReq { release: true, .. });
    let (_, held) = run_repeating(&mut nodes, out, &primaries_round, &to_node_1);
    assert!(held.is_some(), "the primaries' round");
    assert!(
        nodes[0].replica_transactions(2).is_empty(),
        "node 1 kept a record after the backups' round: {:?}",
        nodes[0].replica_transactions(2)
    );
}
