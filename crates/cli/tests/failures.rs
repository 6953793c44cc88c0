//! Data node failures over real processes on 127.0.0.1: `shoal bench bank`
//! runs on 4 data nodes in two node groups of two while data nodes are
//! killed (one per node group, a little apart; two at the same moment,
//! where the arbitrator decides) or frozen (SIGSTOP) and then restarted.
//! The bank must end with its total unchanged, no unknown outcome, and a
//! history that matches every reported outcome; the restarted nodes
//! rejoin, and then every replica of every fragment holds the same rows
//! (`shoal verify`, row by row).

mod common;

use common::TestCluster;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Heartbeats in these tests: a frozen node is declared failed after four
/// missed ones.
const HEARTBEAT_MS: u64 = 250;

fn four_nodes() -> TestCluster {
    TestCluster::start_nodes(4, 2, |c| {
        c.heartbeat_interval_ms = HEARTBEAT_MS;
        c.arbitration_timeout_ms = 2000;
    })
}

/// A running `shoal bench bank`, its stderr collected by a thread.
struct Bank {
    child: Child,
    stderr: Arc<Mutex<String>>,
    reader: std::thread::JoinHandle<()>,
}

/// Starts `shoal bench bank` for `secs` seconds against the cluster and
/// waits until its accounts exist and the transfers run (so that a fault
/// injected next meets transfers, however slow the set-up was).
fn start_bank(cluster: &TestCluster, secs: u32) -> Bank {
    let mut child = Command::new(common::SHOAL)
        .args([
            "bench",
            "bank",
            "--connect",
            &cluster.mgmd_addr,
            "--accounts",
            "500",
            "--threads",
            "6",
            "--duration-secs",
            &secs.to_string(),
            "--timeline-ms",
            "500",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start shoal bench bank");
    let stderr = Arc::new(Mutex::new(String::new()));
    let pipe = child.stderr.take().expect("piped stderr");
    let reader = {
        let stderr = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = stderr.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        })
    };
    let bank = Bank {
        child,
        stderr,
        reader,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !bank.stderr.lock().unwrap().contains(" accounts, ") {
        assert!(
            Instant::now() < deadline,
            "the bank did not set up its accounts within 60 s:\n{}\n{}",
            bank.stderr.lock().unwrap(),
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Some transfers before the fault.
    std::thread::sleep(Duration::from_millis(1000));
    bank
}

impl Bank {
    /// Where the bank's output stands now (for [`transfers_after`]).
    fn mark(&self) -> usize {
        self.stderr.lock().unwrap().len()
    }
}

/// Transfers the bank reported committed in its timeline lines
/// (`bank: t=12.3 s  +312 transfers ...`) after output position `mark`.
fn transfers_after(stderr: &str, mark: usize) -> u64 {
    stderr
        .get(mark..)
        .unwrap_or("")
        .lines()
        .filter(|l| l.starts_with("bank: t="))
        .filter_map(|l| l.split('+').nth(1)?.split(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Waits for the bank and checks its report: total kept, no unknown
/// outcome, history and balances verified. Returns the report and the
/// bank's stderr.
fn finish_bank(cluster: &TestCluster, bank: Bank) -> (serde_json::Value, String) {
    let Bank {
        child,
        stderr,
        reader,
    } = bank;
    let out = child.wait_with_output().expect("bank output");
    reader.join().expect("stderr reader");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = stderr.lock().unwrap().clone();
    assert!(
        out.status.success(),
        "bank failed:\n{stdout}\n{stderr}\n{}",
        cluster.logs()
    );
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["unknown"], 0, "{report}");
    assert_eq!(report["history_verified"], true, "{report}");
    assert_eq!(report["balances_verified"], true, "{report}");
    assert_eq!(report["committed"], report["history_rows"], "{report}");
    for t in report["totals"].as_array().unwrap() {
        assert_eq!(t.as_i64(), Some(500_000), "{report}");
    }
    (report, stderr)
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
}

fn kill9(cluster: &mut TestCluster, node: u16) {
    let mut child = cluster.datanodes[node as usize - 1]
        .take()
        .expect("a running data node");
    child.kill().expect("kill -9");
    child.wait().expect("reap");
}

fn restart(cluster: &mut TestCluster, node: u16) {
    let child = cluster.spawn_datanode(node);
    cluster.datanodes[node as usize - 1] = Some(child);
}

#[test]
fn killed_nodes_one_per_group_lose_nothing_and_rejoin() {
    let mut cluster = four_nodes();
    let bank = start_bank(&cluster, 8);
    kill9(&mut cluster, 2);
    std::thread::sleep(Duration::from_millis(1500));
    restart(&mut cluster, 2);
    kill9(&mut cluster, 3);
    std::thread::sleep(Duration::from_millis(1000));
    restart(&mut cluster, 3);
    let mark = bank.mark();
    let (_, stderr) = finish_bank(&cluster, bank);
    // The bank kept committing after the failures.
    assert!(transfers_after(&stderr, mark) > 0, "{stderr}");
    cluster.wait_started();
    cluster.verify_replicas();
}

#[test]
fn two_nodes_killed_at_once_the_arbitrator_decides() {
    let mut cluster = four_nodes();
    let bank = start_bank(&cluster, 6);
    // One node of each group, both signalled before either is reaped.
    let mut two: Vec<_> = [2u16, 3]
        .iter()
        .map(|&n| cluster.datanodes[n as usize - 1].take().expect("running"))
        .collect();
    for child in &two {
        signal(child, libc::SIGKILL);
    }
    for child in &mut two {
        child.wait().expect("reap");
    }
    std::thread::sleep(Duration::from_millis(1500));
    restart(&mut cluster, 2);
    restart(&mut cluster, 3);
    finish_bank(&cluster, bank);
    cluster.wait_started();
    // When one round drops both, the survivors are exactly half (one per
    // group) and only the arbitrator lets them go on; when the two links
    // closed far enough apart for two rounds, each round kept a majority.
    let logs = cluster.logs();
    if logs.contains("failed [2, 3]") || logs.contains("failed [3, 2]") {
        assert!(logs.contains("asking the arbitrator"), "{logs}");
    }
    cluster.verify_replicas();
}

#[test]
fn a_lone_survivor_asks_the_arbitrator() {
    // Two data nodes, one group: when one dies, the other is exactly half.
    let mut cluster = TestCluster::start_nodes(2, 2, |c| c.heartbeat_interval_ms = HEARTBEAT_MS);
    let bank = start_bank(&cluster, 5);
    kill9(&mut cluster, 2);
    std::thread::sleep(Duration::from_millis(1000));
    restart(&mut cluster, 2);
    finish_bank(&cluster, bank);
    cluster.wait_started();
    let logs = cluster.log("datanode-1.log");
    assert!(logs.contains("asking the arbitrator"), "{logs}");
    cluster.verify_replicas();
}

#[test]
fn a_frozen_node_is_declared_failed_then_stops_and_rejoins() {
    let mut cluster = four_nodes();
    let bank = start_bank(&cluster, 7);
    let frozen = cluster.datanodes[3].take().expect("node 4");
    signal(&frozen, libc::SIGSTOP);
    // Four missed heartbeats and the round: the survivors drop it while it
    // is still frozen (waited for by the log, not by a guess of the time).
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cluster.log("datanode-1.log").contains("failed [4]") {
        assert!(
            Instant::now() < deadline,
            "the frozen node was not declared failed\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The survivors go on while it is frozen.
    let mark = bank.mark();
    let deadline = Instant::now() + Duration::from_secs(30);
    while transfers_after(&bank.stderr.lock().unwrap(), mark) == 0 {
        assert!(
            Instant::now() < deadline,
            "no transfer committed while data node 4 was frozen and out\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&frozen, libc::SIGCONT);
    // Thawed, it learns it is out and stops by itself.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut frozen = frozen;
    let status = loop {
        if let Some(status) = frozen.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the thawed node did not stop\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "it stops with an error: {status}");
    restart(&mut cluster, 4);
    finish_bank(&cluster, bank);
    cluster.wait_started();
    let log = cluster.log("datanode-4.log");
    assert!(
        log.contains("declared this node failed")
            || log.contains("was declared failed by the cluster"),
        "{log}"
    );
    cluster.verify_replicas();
}

#[test]
fn a_restarting_node_shows_how_far_its_copy_got() {
    // A slow copy (the floor of 64 KiB/s) of ~300 KB of rows: seconds
    // during which `shoal mgm -e show` reports the copy's progress.
    // Diskless, so the restarted node has no files of its own and copies
    // every row: with files, how much is left to copy depends on whether
    // a checkpoint or an epoch had made the rows durable before the kill
    // (sometimes nothing, and the copy went from 0 to 100 % at once).
    let mut cluster = TestCluster::start_nodes(2, 2, |c| {
        c.heartbeat_interval_ms = HEARTBEAT_MS;
        c.restart_copy_bytes_per_sec = 64 << 10;
        c.diskless = true;
    });
    let load = cluster.shoal(&[
        "bench",
        "flexasynch",
        "--connect",
        &cluster.mgmd_addr,
        "-t",
        "1",
        "-p",
        "100",
        "-a",
        "25",
        "-o",
        "30",
        "-l",
        "1",
        "--keep",
    ]);
    assert!(
        load.status.success(),
        "{}",
        String::from_utf8_lossy(&load.stderr)
    );
    kill9(&mut cluster, 2);
    restart(&mut cluster, 2);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        let out = cluster.shoal(&["mgm", "--connect", &cluster.mgmd_addr, "-e", "show"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if let Some(pct) = text
            .split("copying fragments, ")
            .nth(1)
            .and_then(|rest| rest.split(" %").next())
            .and_then(|p| p.trim().parse::<u32>().ok())
        {
            seen.push(pct);
        }
        if seen.iter().any(|&p| p > 0 && p < 100) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no progress between 0 and 100 % shown (seen {seen:?}); last show:\n{text}\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Never backwards.
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    cluster.wait_started();
    cluster.verify_replicas();
}
