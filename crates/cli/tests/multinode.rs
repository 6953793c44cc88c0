//! Clusters of several real data node processes: replication inside node
//! groups, transactions across node groups, deadlocks across nodes, and the
//! bank workload keeping its total and a history that matches its outcomes.

mod common;

use common::{runtime, TestCluster};
use shoal_client::{
    Cluster, ColumnDef, ColumnType, ErrorCode, ExecType, LockMode, Record, Table, TableDef, Value,
};
use shoal_types::distribution::{distribution_key, DistributionMap};
use shoal_types::{hash_key, RowLayout};

fn accounts_def() -> TableDef {
    TableDef::new(
        "acct",
        vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: true }),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
        ],
        &["id"],
    )
    .unwrap()
}

fn row(id: u64, v: i64) -> [Value; 2] {
    [Value::UInt(id), Value::Int(v)]
}

/// The node group holding the primary of key `id`.
fn group_of(table: &Table, id: u64) -> u16 {
    let def = table.def();
    let map: DistributionMap = def.distribution.as_ref().unwrap().map().unwrap();
    let layout = RowLayout::new(def);
    let mut key = Vec::new();
    layout.encode_key(&[Value::UInt(id)], &mut key).unwrap();
    let dkey = distribution_key(&layout, &key, None).unwrap();
    map.fragments[map.fragment_of(hash_key(dkey)) as usize].node_group
}

async fn value(c: &Cluster, rec: &Record, id: u64) -> Option<Value> {
    let mut tx = c.transaction();
    let op = tx
        .read(rec, &[Value::UInt(id)], LockMode::CommittedRead)
        .unwrap();
    tx.ignore_error(op);
    tx.execute(ExecType::Commit).await.unwrap();
    tx.row(op).and_then(|r| r.get("v"))
}

#[test]
fn two_replicas_hold_every_commit_and_no_abort() {
    let cluster = TestCluster::start_nodes(2, 2, |_| {});
    runtime().block_on(async {
        let c = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let rec = c.create_table(accounts_def()).await.unwrap().full_record();
        let mut tx = c.transaction();
        for id in 0..50 {
            tx.insert(&rec, &row(id, id as i64)).unwrap();
        }
        tx.execute(ExecType::Commit).await.unwrap();
        // Rolled back and failed transactions leave nothing on any replica.
        let mut tx = c.transaction();
        for id in 100..150 {
            tx.insert(&rec, &row(id, 0)).unwrap();
        }
        tx.execute(ExecType::NoCommit).await.unwrap();
        tx.execute(ExecType::Rollback).await.unwrap();
        let mut tx = c.transaction();
        tx.insert(&rec, &row(200, 0)).unwrap();
        tx.insert(&rec, &row(7, 0)).unwrap(); // exists: aborts everything
        let e = tx.execute(ExecType::Commit).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::TupleAlreadyExists);
        for id in [0, 49, 100, 200] {
            let want = (id < 50).then_some(Value::Int(id as i64));
            assert_eq!(value(&c, &rec, id).await, want, "key {id}");
        }
    });
    let all = cluster.wait_for_all(|_, s| s.rows == 50);
    for (id, s) in all {
        assert_eq!(s.rows, 50, "node {id} holds a replica of every row");
    }
}

#[test]
fn a_transaction_across_node_groups_is_atomic() {
    let cluster = TestCluster::start_nodes(4, 2, |c| c.deadlock_timeout_ms = 300);
    runtime().block_on(async {
        let c = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let table = c.create_table(accounts_def()).await.unwrap();
        let rec = table.full_record();
        let in_group = |g: u16| -> Vec<u64> {
            (0..1000u64)
                .filter(|&id| group_of(&table, id) == g)
                .take(3)
                .collect()
        };
        let (g0, g1) = (in_group(0), in_group(1));

        // Commits on both node groups at once.
        let mut tx = c.transaction();
        tx.insert(&rec, &row(g0[0], 10)).unwrap();
        tx.insert(&rec, &row(g1[0], 20)).unwrap();
        if let Err(e) = tx.execute(ExecType::Commit).await {
            panic!("{e}\n{}", cluster.logs());
        }
        assert_eq!(value(&c, &rec, g0[0]).await, Some(Value::Int(10)));
        assert_eq!(value(&c, &rec, g1[0]).await, Some(Value::Int(20)));

        // Fails in group 1 after writing in group 0: nothing stays.
        let mut tx = c.transaction();
        tx.insert(&rec, &row(g0[1], 11)).unwrap();
        tx.update(&rec, &row(g0[0], 99)).unwrap();
        tx.insert(&rec, &row(g1[0], 21)).unwrap(); // exists
        let e = tx.execute(ExecType::Commit).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::TupleAlreadyExists);
        assert_eq!(value(&c, &rec, g0[1]).await, None);
        assert_eq!(value(&c, &rec, g0[0]).await, Some(Value::Int(10)));

        // Two transactions lock a row in each group in opposite order: the
        // deadlock ends by timeout. Each node times out the wait it holds,
        // so two waits that began together may both time out before either
        // abort's release arrives (as with NDB's deadlock detection
        // timeout): at least one gets the deadlock timeout, neither hangs
        // or fails otherwise, and what committed is there.
        let mut a = c.transaction();
        a.read(&rec, &[Value::UInt(g0[0])], LockMode::Exclusive)
            .unwrap();
        a.execute(ExecType::NoCommit).await.unwrap();
        let mut b = c.transaction();
        b.read(&rec, &[Value::UInt(g1[0])], LockMode::Exclusive)
            .unwrap();
        b.execute(ExecType::NoCommit).await.unwrap();
        a.update(&rec, &row(g1[0], 1)).unwrap();
        b.update(&rec, &row(g0[0], 2)).unwrap();
        let (ra, rb) = tokio::join!(a.execute(ExecType::Commit), b.execute(ExecType::Commit));
        let codes = [ra.err().map(|e| e.code), rb.err().map(|e| e.code)];
        assert!(
            codes.contains(&Some(ErrorCode::DeadlockTimeout))
                && codes
                    .iter()
                    .all(|c| matches!(c, None | Some(ErrorCode::DeadlockTimeout))),
            "{codes:?}"
        );
        let (a_committed, b_committed) = (codes[0].is_none(), codes[1].is_none());
        assert_eq!(
            value(&c, &rec, g1[0]).await,
            Some(Value::Int(if a_committed { 1 } else { 20 }))
        );
        assert_eq!(
            value(&c, &rec, g0[0]).await,
            Some(Value::Int(if b_committed { 2 } else { 10 }))
        );
    });
    // Replicas agree: the two nodes of each group hold the same rows (the
    // statuses mgmd shows are at most a second old).
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let all = cluster.statuses();
    assert_eq!(all.len(), 4);
    let rows = |id: u16| all.iter().find(|(n, _)| *n == id).unwrap().1.rows;
    assert_eq!(rows(1), rows(2), "node group 0 replicas");
    assert_eq!(rows(3), rows(4), "node group 1 replicas");
    assert_eq!(rows(1) + rows(3), 2, "two rows in the table");
}

#[test]
fn bank_keeps_its_total_on_four_nodes() {
    let cluster = TestCluster::start_nodes(4, 2, |_| {});
    let out = cluster.shoal(&[
        "bench",
        "bank",
        "--connect",
        &cluster.mgmd_addr,
        "--accounts",
        "200",
        "--threads",
        "6",
        "--duration-secs",
        "3",
        "--check-every-secs",
        "1",
        "--timeline-ms",
        "200",
        "--json",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        cluster.logs()
    );
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert!(report["transfers"].as_u64().unwrap() > 100, "{report}");
    assert!(report["checks"].as_u64().unwrap() >= 2, "{report}");
    for t in report["totals"].as_array().unwrap() {
        assert_eq!(t.as_i64(), Some(200_000));
    }
    // The history: every committed transfer left its row, no abort did,
    // and every balance is what the history says. A healthy cluster gives
    // no unknown outcomes.
    let n = |key: &str| {
        report[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key}: {report}"))
    };
    assert_eq!(report["history_verified"], true, "{report}");
    assert_eq!(report["balances_verified"], true, "{report}");
    assert_eq!(n("unknown"), 0, "{report}");
    assert!(n("committed") > 0, "{report}");
    assert_eq!(n("committed"), n("transfers"), "{report}");
    assert_eq!(n("history_rows"), n("committed"), "{report}");
    // The timeline accounts for every attempt, step by step.
    let steps = report["timeline"].as_array().unwrap();
    assert!(steps.len() >= 10, "{report}");
    let sum = |key: &str| steps.iter().map(|s| s[key].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("transfers"), n("committed"), "{report}");
    assert_eq!(sum("aborts"), n("aborted"), "{report}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bank: t=") && stderr.contains("/s  aborts "),
        "{stderr}"
    );

    // `--check-only` sums the existing accounts and changes nothing; with
    // an account the table lacks it fails.
    let check = |accounts: &str| {
        cluster.shoal(&[
            "bench",
            "bank",
            "--connect",
            &cluster.mgmd_addr,
            "--accounts",
            accounts,
            "--check-only",
        ])
    };
    let out = check("200");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("total 200000 (expected 200000): ok"),
        "{stdout}"
    );
    let out = check("201");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("summing the balances"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
