//! mgmd restarts under running data nodes, over real processes on
//! 127.0.0.1: the data nodes keep serving, reattach to the new mgmd as the
//! same nodes in the same starts (no start is counted), and catch up on
//! schema changes made while they were away.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, runtime, TestCluster, SHOAL};
use shoal_client::{Cluster, ColumnDef, ColumnType, ExecType, LockMode, Record, TableDef, Value};
use shoal_mgmd::{ClusterStatus, MgmClient, NodeState};
use shoal_types::ErrorCode;

/// How long the data nodes may take to reattach once mgmd listens again
/// (the link's retry interval is at most 2 s).
const REATTACH_WAIT: Duration = Duration::from_secs(8);

fn def(name: &str) -> TableDef {
    TableDef::new(
        name,
        vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: true }),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
        ],
        &["id"],
    )
    .unwrap()
}

async fn insert(c: &Cluster, rec: &Record, ids: std::ops::Range<u64>) {
    let mut tx = c.transaction();
    for id in ids {
        tx.insert(rec, &[Value::UInt(id), Value::Int(id as i64 * 10)])
            .unwrap();
    }
    tx.execute(ExecType::Commit).await.unwrap();
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

fn status(addr: &str) -> Option<ClusterStatus> {
    runtime().block_on(async {
        let mut c = MgmClient::connect(addr).await.ok()?;
        c.show().await.ok()
    })
}

/// Each data node's (state, start number) as mgmd shows it.
fn starts(s: &ClusterStatus) -> Vec<(u16, NodeState, u32)> {
    s.nodes
        .iter()
        .filter(|n| n.kind == "datanode")
        .map(|n| (n.node_id, n.state, n.incarnation))
        .collect()
}

/// The start number of each data node (their only start; mgmd numbers
/// the starts of all data nodes from one sequence).
fn start_numbers(cluster: &TestCluster) -> Vec<(u16, NodeState, u32)> {
    let s = status(&cluster.mgmd_addr).expect("mgmd status");
    let got = starts(&s);
    let mut numbers: Vec<u32> = got.iter().map(|&(_, _, n)| n).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, vec![1, 2], "{got:?}");
    got
}

/// Waits until mgmd shows every data node started in the start it had
/// before (`want`); panics with the last status and the logs after
/// `REATTACH_WAIT`.
fn wait_reattached(cluster: &TestCluster, want: &[(u16, NodeState, u32)]) {
    let want = want.to_vec();
    let since = Instant::now();
    loop {
        let last = status(&cluster.mgmd_addr);
        if last.as_ref().map(starts) == Some(want.clone()) {
            return;
        }
        assert!(
            since.elapsed() < REATTACH_WAIT,
            "the data nodes did not come back as started in their start within {REATTACH_WAIT:?}; \
             last status: {last:#?}\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn mgm(addr: &str, command: &str) -> Output {
    Command::new(SHOAL)
        .args([
            "mgm",
            "--connect",
            addr,
            "--timeout-secs",
            "30",
            "-e",
            command,
        ])
        .output()
        .expect("run shoal mgm")
}

#[test]
fn data_nodes_reattach_in_the_same_start_after_mgmd_restarts() {
    let mut cluster = TestCluster::start_nodes(2, 2, |_| {});
    let addr = cluster.mgmd_addr.clone();
    // One runtime for the whole test: the client's connections live on it.
    let rt = runtime();
    let c = rt.block_on(Cluster::connect(&addr)).unwrap();
    let rec = rt.block_on(async {
        let rec = c.create_table(def("before")).await.unwrap().full_record();
        insert(&c, &rec, 0..10).await;
        rec
    });
    let before = start_numbers(&cluster);

    cluster.kill_mgmd();
    // Without mgmd the data nodes keep serving a client that knows them.
    rt.block_on(async {
        insert(&c, &rec, 10..20).await;
        assert_eq!(value(&c, &rec, 15).await, Some(Value::Int(150)));
    });
    cluster.start_mgmd();
    wait_reattached(&cluster, &before);
    cluster.assert_alive();

    let o = mgm(&addr, "show");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    for &(id, _, start) in &before {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("id={id} ")))
            .unwrap_or_else(|| panic!("no line for node {id}: {text}"));
        assert!(
            line.contains(" started ") && line.contains(&format!("start #{start}")),
            "{line}"
        );
    }
    for &(id, _, start) in &before {
        let log = cluster.log(&format!("datanode-{id}.log"));
        assert!(log.contains(&format!("data node {id}: lost mgmd")), "{log}");
        assert!(
            log.contains(&format!(
                "data node {id}: reattached to mgmd (start {start};"
            )),
            "{log}"
        );
    }

    // Schema changes reach the data nodes again, and the data from before
    // (and from while mgmd was away) is all there.
    let c2 = rt.block_on(Cluster::connect(&addr)).unwrap();
    rt.block_on(async {
        let after = c2.create_table(def("after")).await.unwrap().full_record();
        insert(&c2, &after, 0..5).await;
        assert_eq!(value(&c2, &after, 3).await, Some(Value::Int(30)));
        let before = c2.table("before").await.unwrap().full_record();
        for id in [0, 9, 10, 19] {
            assert_eq!(
                value(&c2, &before, id).await,
                Some(Value::Int(id as i64 * 10))
            );
        }
    });
    let all = cluster.wait_for_all(|_, s| s.rows == 25);
    for (id, s) in all {
        assert_eq!(s.rows, 25, "node {id} holds a replica of every row");
    }
}

#[test]
fn schema_changes_made_while_the_data_nodes_were_away_are_caught_up() {
    let mut cluster = TestCluster::start_nodes(2, 2, |_| {});
    let addr = cluster.mgmd_addr.clone();
    runtime().block_on(async {
        let c = Cluster::connect(&addr).await.unwrap();
        let rec = c.create_table(def("before")).await.unwrap().full_record();
        insert(&c, &rec, 0..10).await;
    });
    let all = cluster.wait_for_all(|_, s| s.rows == 10);
    assert!(all.iter().all(|(_, s)| s.rows == 10), "{all:?}");
    let before = start_numbers(&cluster);

    // mgmd goes down, and a stand-in on the same data dir but another port
    // (where the data nodes do not look) changes the schema: one table
    // created, one dropped, while no data node hears of it.
    cluster.kill_mgmd();
    let mut away = cluster.config.clone();
    let away_port = free_port();
    away.nodes
        .iter_mut()
        .find(|n| n.kind == "mgmd")
        .expect("an mgmd node")
        .port = away_port;
    let away_config = cluster.dir.path().join("config-away.toml");
    std::fs::write(&away_config, away.to_toml()).unwrap();
    let log = std::fs::File::create(cluster.dir.path().join("mgmd-away.log")).unwrap();
    let mut stand_in = Command::new(SHOAL)
        .args(["mgmd", "--config", away_config.to_str().unwrap()])
        .env("SHOAL_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("spawn the stand-in mgmd");
    let away_addr = format!("127.0.0.1:{away_port}");
    let changed = runtime().block_on(async {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut s = loop {
            match MgmClient::connect(&away_addr).await {
                Ok(c) => break c.register_api().await?,
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        s.create_table(def("while_away")).await?;
        s.drop_table("before").await
    });
    let _ = stand_in.kill();
    let _ = stand_in.wait();
    changed.unwrap_or_else(|e| {
        panic!(
            "schema change through the stand-in mgmd: {e}\n{}",
            cluster.log("mgmd-away.log")
        )
    });

    cluster.start_mgmd();
    wait_reattached(&cluster, &before);
    for &(id, _, start) in &before {
        let log = cluster.log(&format!("datanode-{id}.log"));
        assert!(
            log.contains(&format!(
                "data node {id}: reattached to mgmd (start {start}; 1 table(s) created and 1 dropped meanwhile)"
            )),
            "{log}"
        );
    }
    // The dropped table's rows are gone from the data nodes.
    let all = cluster.wait_for_all(|_, s| s.rows == 0);
    assert!(all.iter().all(|(_, s)| s.rows == 0), "{all:?}");
    // The created one is served.
    runtime().block_on(async {
        let c = Cluster::connect(&addr).await.unwrap();
        let rec = c.table("while_away").await.unwrap().full_record();
        insert(&c, &rec, 0..3).await;
        assert_eq!(value(&c, &rec, 2).await, Some(Value::Int(20)));
        let gone = c.table("before").await.unwrap_err();
        assert_eq!(gone.code, ErrorCode::NoSuchTable, "{gone}");
    });
    let all = cluster.wait_for_all(|_, s| s.rows == 3);
    assert!(all.iter().all(|(_, s)| s.rows == 3), "{all:?}");
    cluster.assert_alive();
}
