//! Durability over real processes on 127.0.0.1: every process of a
//! cluster is killed (kill -9) while `shoal bench bank` transfers money,
//! then started again on the same data dir: the bank's accounts are all
//! there with the total unchanged, and the replicas agree row by row. A
//! clean stop keeps every row too. A diskless cluster comes back empty.

mod common;

use common::TestCluster;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const ACCOUNTS: &str = "300";

fn two_nodes(diskless: bool) -> TestCluster {
    TestCluster::start_nodes(2, 2, |c| {
        c.heartbeat_interval_ms = 250;
        c.diskless = diskless;
    })
}

/// Runs the bank to its end (accounts created, transfers, checks).
fn bank_runs(cluster: &TestCluster, secs: &str) {
    let out = cluster.shoal(&[
        "bench",
        "bank",
        "--connect",
        &cluster.mgmd_addr,
        "--accounts",
        ACCOUNTS,
        "--threads",
        "4",
        "--duration-secs",
        secs,
    ]);
    assert!(
        out.status.success(),
        "bank failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        cluster.logs()
    );
}

/// `shoal bench bank --check-only`: its output, and whether it passed.
fn bank_check(cluster: &TestCluster) -> (bool, String) {
    let out = cluster.shoal(&[
        "bench",
        "bank",
        "--connect",
        &cluster.mgmd_addr,
        "--accounts",
        ACCOUNTS,
        "--check-only",
    ]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Stops every data node and mgmd: kill -9, or SIGTERM (a clean stop).
fn stop_all(cluster: &mut TestCluster, sig: libc::c_int) {
    let mut children: Vec<Child> = cluster
        .datanodes
        .iter_mut()
        .filter_map(Option::take)
        .collect();
    for c in &children {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(c.id() as libc::pid_t, sig);
        }
    }
    for c in &mut children {
        c.wait().expect("reap a data node");
    }
    cluster.kill_mgmd();
}

fn start_all(cluster: &mut TestCluster) {
    cluster.start_mgmd();
    for id in 1..=cluster.datanodes.len() as u16 {
        let child = cluster.spawn_datanode(id);
        cluster.datanodes[id as usize - 1] = Some(child);
    }
    cluster.wait_started();
}

#[test]
fn a_cluster_killed_mid_bank_comes_back_from_its_files() {
    let mut cluster = two_nodes(false);
    bank_runs(&cluster, "1");
    // Transfers in flight when everything dies: the bank (which sets its
    // tables up again) must be past its set-up and transferring.
    let mut load = Command::new(common::SHOAL)
        .args([
            "bench",
            "bank",
            "--connect",
            &cluster.mgmd_addr,
            "--accounts",
            ACCOUNTS,
            "--threads",
            "4",
            "--duration-secs",
            "30",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the bank");
    let pipe = load.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if line.contains(" accounts, ") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("the bank did not set up its accounts\n{}", cluster.logs()));
    std::thread::sleep(Duration::from_millis(1000));
    stop_all(&mut cluster, libc::SIGKILL);
    let _ = load.kill();
    let _ = load.wait();

    start_all(&mut cluster);
    let (ok, text) = bank_check(&cluster);
    assert!(
        ok,
        "after kill -9 of every process: {text}\n{}",
        cluster.logs()
    );
    cluster.verify_replicas();
    let logs = cluster.logs();
    assert!(
        logs.contains("restoring from") && logs.contains("restored the rows to the end of epoch"),
        "{logs}"
    );
    // And the cluster still works: more transfers, the total still right.
    bank_runs(&cluster, "1");
}

#[test]
fn a_clean_stop_keeps_every_row() {
    let mut cluster = two_nodes(false);
    bank_runs(&cluster, "1");
    stop_all(&mut cluster, libc::SIGTERM);
    start_all(&mut cluster);
    let (ok, text) = bank_check(&cluster);
    assert!(ok, "after a clean stop: {text}\n{}", cluster.logs());
    cluster.verify_replicas();
}

#[test]
fn a_diskless_cluster_comes_back_empty() {
    let mut cluster = two_nodes(true);
    bank_runs(&cluster, "1");
    stop_all(&mut cluster, libc::SIGKILL);
    start_all(&mut cluster);
    let (ok, text) = bank_check(&cluster);
    assert!(!ok, "a diskless cluster kept its rows: {text}");
    assert!(
        text.contains("missing") || text.contains("did not exist"),
        "{text}"
    );
    let dir = cluster.data_dir();
    assert!(
        !dir.join("datanode-1").join("redo.log").exists(),
        "a diskless data node wrote a redo log"
    );
}
