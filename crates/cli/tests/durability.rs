//! Durability over real processes on 127.0.0.1: every process of a
//! cluster is killed (kill -9) while `shoal bench bank` transfers money,
//! then started again on the same data dir: the bank's accounts are all
//! there with the total unchanged, and the replicas agree row by row. A
//! clean stop keeps every row too. A diskless cluster comes back empty.
//! Local checkpoints free the log and a restart reads them; a redo log
//! filled on purpose refuses writes with a temporary error while the node
//! stays up.

mod common;

use common::{runtime, TestCluster};
use shoal_client::{
    Cluster, ColumnDef, ColumnType, ErrorClass, ErrorCode, ExecType, LockMode, ShoalError,
    TableDef, Value,
};
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
    let dir = cluster.data_dir().join("datanode-1");
    let logs: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("redo") || n.starts_with("lcp"))
                .collect()
        })
        .unwrap_or_default();
    assert!(logs.is_empty(), "a diskless data node wrote {logs:?}");
}

/// The redo log's files and the checkpoints in a data node's dir.
fn files_of(cluster: &TestCluster, node: u16) -> (Vec<String>, Vec<String>) {
    let dir = cluster.data_dir().join(format!("datanode-{node}"));
    let mut redo = Vec::new();
    let mut lcp = Vec::new();
    for e in std::fs::read_dir(&dir).expect("data dir").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("redo-") {
            redo.push(name);
        } else if name.starts_with("lcp-") {
            lcp.push(name);
        }
    }
    redo.sort();
    lcp.sort();
    (redo, lcp)
}

#[test]
fn checkpoints_free_the_log_and_a_restart_reads_them() {
    // A checkpoint each time the log grows by 2 MiB.
    let mut cluster = TestCluster::start_nodes(2, 2, |c| {
        c.heartbeat_interval_ms = 250;
        c.redo_log_bytes = 16 << 20;
    });
    // Bank traffic until a checkpoint has freed the log's first file: how
    // much traffic that takes depends on the machine's speed, so it runs
    // in rounds (bounded) rather than for a fixed time.
    let mut rounds = 0;
    loop {
        bank_runs(&cluster, "2");
        rounds += 1;
        let (redo, lcp) = files_of(&cluster, 1);
        let logs = cluster.logs();
        let freed = logs.contains("local checkpoint")
            && logs.contains("MB of log freed")
            && !redo.is_empty()
            && redo[0] != "redo-00000000.log"
            && !lcp.is_empty();
        if freed {
            break;
        }
        assert!(
            rounds < 15,
            "after {rounds} rounds of bank traffic the log's first file was never freed \
             (redo files {redo:?}, checkpoints {lcp:?})\n{logs}"
        );
    }
    stop_all(&mut cluster, libc::SIGKILL);
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
        logs.contains("restoring from") && logs.contains("checkpoints "),
        "{logs}"
    );
    bank_runs(&cluster, "1");
}

fn wide_table() -> TableDef {
    TableDef::new(
        "fill",
        vec![
            ColumnDef::new("id", ColumnType::BigInt { unsigned: true }),
            ColumnDef::new("s", ColumnType::VarChar(400)),
        ],
        &["id"],
    )
    .unwrap()
}

/// Inserts rows `from..from + n` of 400 bytes each in one transaction.
async fn insert_batch(client: &Cluster, from: u64, n: u64) -> Result<(), ShoalError> {
    let rec = client.table("fill").await?.full_record();
    let mut tx = client.transaction();
    let text = "x".repeat(400);
    for id in from..from + n {
        tx.insert(&rec, &[Value::UInt(id), Value::Str(text.clone())])?;
    }
    tx.execute(ExecType::Commit).await.map(|_| ())
}

/// Writes rows `from..from + n` of 400 bytes each (insert or update) in
/// one transaction.
async fn upsert_batch(client: &Cluster, from: u64, n: u64) -> Result<(), ShoalError> {
    let rec = client.table("fill").await?.full_record();
    let mut tx = client.transaction();
    let text = "y".repeat(400);
    for id in from..from + n {
        tx.write(&rec, &[Value::UInt(id), Value::Str(text.clone())])?;
    }
    tx.execute(ExecType::Commit).await.map(|_| ())
}

#[test]
fn a_full_redo_log_refuses_writes_and_the_node_stays_up() {
    // 16 MiB of log and slow checkpoints: writes outrun them.
    let mut cluster = TestCluster::start_with(|c| {
        c.redo_log_bytes = 16 << 20;
        c.checkpoint_bytes_per_sec = 1 << 20;
        c.data_memory_bytes = 256 << 20;
    });
    let rt = runtime();
    let client = rt.block_on(async {
        let client = Cluster::connect(&cluster.mgmd_addr).await.expect("connect");
        client
            .create_table(wide_table())
            .await
            .expect("create table");
        client
    });
    const BATCH: u64 = 500;
    let refused = rt.block_on(async {
        let mut next = 0u64;
        // Four batches at a time, until one is refused (16 MiB is ~40,000
        // rows; give up well past that).
        while next < 400_000 {
            let batches: Vec<_> = (0..4)
                .map(|i| insert_batch(&client, next + i * BATCH, BATCH))
                .collect();
            next += 4 * BATCH;
            for r in futures::future::join_all(batches).await {
                match r {
                    Ok(()) => {}
                    Err(e) if e.code == ErrorCode::RedoLogFull => return Some((next, e)),
                    Err(e) => panic!("insert failed: {e}"),
                }
            }
        }
        None
    });
    let (rows, e) = refused.unwrap_or_else(|| panic!("no write was refused\n{}", cluster.logs()));
    assert_eq!(e.class(), shoal_client::ErrorClass::Temporary, "{e}");
    assert!(e.to_string().contains("redo log"), "{e}");
    cluster.assert_alive();
    rt.block_on(async {
        // Reads go on while writes are refused.
        let rec = client.table("fill").await.unwrap().full_record();
        let mut tx = client.transaction();
        let op = tx
            .read(&rec, &[Value::UInt(0)], LockMode::CommittedRead)
            .unwrap();
        tx.execute(ExecType::Commit)
            .await
            .expect("a read while the log is full");
        assert!(tx.row(op).is_some());
        // A checkpoint frees the log: writes are taken again.
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            match insert_batch(&client, rows + 1_000_000, 1).await {
                Ok(()) => break,
                Err(e) if e.code == ErrorCode::RedoLogFull => {
                    assert!(std::time::Instant::now() < deadline, "the log never freed");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("insert after the log was full: {e}"),
            }
        }
    });
    cluster.assert_alive();
}

/// A node killed while checkpoints run comes back, copies its rows, logs
/// them once and checkpoints them at once (so its log's space is free
/// again); then a crash of every process restarts from every node's
/// files, the restarted node's included.
#[test]
fn a_node_restarted_while_checkpoints_run_is_restorable_again() {
    let mut cluster = TestCluster::start_nodes(2, 2, |c| {
        c.heartbeat_interval_ms = 250;
        c.redo_log_bytes = 16 << 20;
    });
    bank_runs(&cluster, "2");
    let mut node2 = cluster.datanodes[1].take().expect("node 2 runs");
    node2.kill().expect("kill -9 node 2");
    node2.wait().expect("reap node 2");
    let before = cluster.log("datanode-2.log").len();
    bank_runs(&cluster, "2");
    cluster.datanodes[1] = Some(cluster.spawn_datanode(2));
    cluster.wait_started();
    // Its copy done, it checkpoints every row.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let log = cluster.log("datanode-2.log");
        let since_restart = &log[before.min(log.len())..];
        if since_restart.contains("local checkpoint") && since_restart.contains("(full)") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "node 2 did not checkpoint after its copy\n{since_restart}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (ok, text) = bank_check(&cluster);
    assert!(ok, "after node 2's restart: {text}\n{}", cluster.logs());
    cluster.verify_replicas();

    stop_all(&mut cluster, libc::SIGKILL);
    start_all(&mut cluster);
    let (ok, text) = bank_check(&cluster);
    assert!(
        ok,
        "after kill -9 of every process: {text}\n{}",
        cluster.logs()
    );
    cluster.verify_replicas();
}

fn counts_table() -> TableDef {
    TableDef::new(
        "counts",
        vec![
            ColumnDef::new("id", ColumnType::BigInt { unsigned: true }),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
        ],
        &["id"],
    )
    .unwrap()
}

/// Writes `v` to rows `ids` (insert or update), or deletes them, in
/// transactions of 500 operations; the last one durable. A temporary
/// error (a data node just failed) is retried.
async fn write_rows(client: &Cluster, ids: std::ops::Range<u64>, v: Option<i64>) {
    let table = client.table("counts").await.expect("table");
    let rec = table.full_record();
    let ids: Vec<u64> = ids.collect();
    let chunks: Vec<&[u64]> = ids.chunks(500).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let mut attempts = 0;
        loop {
            let mut tx = client.transaction();
            tx.set_durable(i + 1 == chunks.len());
            for &id in *chunk {
                match v {
                    Some(v) => tx.write(&rec, &[Value::UInt(id), Value::Int(v)]),
                    None => tx.delete(&table, &[Value::UInt(id)]),
                }
                .expect("op");
            }
            match tx.execute(ExecType::Commit).await {
                Ok(_) => break,
                Err(e) if e.class() == ErrorClass::Temporary && attempts < 100 => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("commit: {e}"),
            }
        }
    }
}

/// Reads rows `id` of "counts": each holds `v` = `want` (None: no row).
async fn expect_values(client: &Cluster, rows: &[(u64, Option<i64>)]) {
    let rec = client.table("counts").await.expect("table").full_record();
    for &(id, want) in rows {
        let mut tx = client.transaction();
        let op = tx
            .read(&rec, &[Value::UInt(id)], LockMode::Shared)
            .expect("read");
        tx.ignore_error(op);
        tx.execute(ExecType::Commit).await.expect("read commit");
        let got = tx.row(op).map(|r| r.get("v").expect("v"));
        assert_eq!(got, want.map(Value::Int), "row {id}");
    }
}

/// A data node killed (kill -9) and started again keeps the rows its own
/// checkpoints and log restore (through the durable epoch its sysfile
/// recorded) and copies from the live replica only the rows changed while
/// it was down — updated, deleted, inserted — instead of every row; the
/// replicas then agree row by row and a read sees every change.
#[test]
fn a_restarted_node_keeps_its_own_rows_and_copies_only_the_changes() {
    let mut cluster = TestCluster::start_nodes(2, 2, |c| {
        c.heartbeat_interval_ms = 250;
    });
    let rt = runtime();
    let client = rt.block_on(async {
        let client = Cluster::connect(&cluster.mgmd_addr).await.expect("connect");
        client
            .create_table(counts_table())
            .await
            .expect("create table");
        write_rows(&client, 0..20_000, Some(7)).await;
        client
    });
    // Node 2's sysfile records the durable epoch a little after the
    // commit's answer (the epochs after the one it records are copied
    // again: its files cannot tell whether the cluster kept them).
    std::thread::sleep(Duration::from_millis(1000));
    let mut node2 = cluster.datanodes[1].take().expect("node 2 runs");
    node2.kill().expect("kill -9 node 2");
    node2.wait().expect("reap node 2");
    let before = cluster.log("datanode-2.log").len();
    rt.block_on(async {
        write_rows(&client, 0..1_000, Some(8)).await; // updated
        write_rows(&client, 1_000..2_000, None).await; // deleted
        write_rows(&client, 19_500..20_000, None).await; // the last ids
        write_rows(&client, 20_000..21_000, Some(9)).await; // inserted
        write_rows(&client, 1_500..1_600, Some(10)).await; // back again
    });
    cluster.datanodes[1] = Some(cluster.spawn_datanode(2));
    cluster.wait_started();
    let log = cluster.log("datanode-2.log");
    let since_restart = &log[before.min(log.len())..];
    let copy_done = since_restart
        .lines()
        .find(|l| l.contains("copy done:") && l.contains("kept"))
        .unwrap_or_else(|| panic!("no copy summary\n{since_restart}"));
    // "copy done: C rows (M MB) copied from live replicas, K rows of its own files kept"
    let summary = &copy_done[copy_done.find("copy done:").expect("found")..];
    let numbers: Vec<u64> = summary
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .filter_map(|w| w.parse::<u64>().ok())
        .collect();
    let (copied, kept) = (numbers[0], numbers[numbers.len() - 1]);
    assert!(
        since_restart.contains("keeping the 20000 rows"),
        "node 2 did not keep its rows\n{since_restart}"
    );
    // 1,000 updated, 1,000 inserted, 100 inserted again; 18,000 untouched
    // (a few more may be sent: rows of the epoch it died in).
    assert!(
        (2_100..4_000).contains(&copied) && kept >= 16_000,
        "copied {copied}, kept {kept}: {copy_done}\n{since_restart}"
    );
    cluster.verify_replicas();
    rt.block_on(expect_values(
        &client,
        &[
            (5, Some(8)),
            (1_200, None),
            (1_550, Some(10)),
            (10_000, Some(7)),
            (19_700, None),
            (20_500, Some(9)),
        ],
    ));
    cluster.assert_alive();
}

/// A checkpoint file damaged in its middle (past the first piece a
/// restart reads, so rows before the damage were already applied): the
/// restarted node says so, moves its files aside, drops what it applied,
/// and copies every row from the live replica; the replicas then agree.
#[test]
fn a_node_whose_checkpoint_is_damaged_drops_it_and_copies_every_row() {
    let mut cluster = TestCluster::start_nodes(2, 2, |c| {
        c.heartbeat_interval_ms = 250;
        c.redo_log_bytes = 16 << 20;
    });
    let rt = runtime();
    rt.block_on(async {
        let client = Cluster::connect(&cluster.mgmd_addr).await.expect("connect");
        client
            .create_table(wide_table())
            .await
            .expect("create table");
        for i in 0..60 {
            insert_batch(&client, i * 500, 500).await.expect("insert");
        }
    });
    // Until node 2 recorded a full checkpoint of most of the 12 MB of rows.
    // Every such checkpoint its log names, oldest first.
    let full_ids = |log: &str| -> Vec<u64> {
        log.lines()
            .filter_map(|l| {
                let rest = &l[l.find("local checkpoint ")? + "local checkpoint ".len()..];
                let (id, rest) = rest.split_once(" (full): ")?;
                let rows: u64 = rest.split_once(" rows")?.0.parse().ok()?;
                (rows >= 22_000).then(|| id.parse::<u64>().ok()).flatten()
            })
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut rewritten = std::time::Instant::now();
    loop {
        if !full_ids(&cluster.log("datanode-2.log")).is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "node 2 wrote no full checkpoint of the rows\n{}",
            cluster.log("datanode-2.log")
        );
        if rewritten.elapsed() > Duration::from_secs(3) {
            // Every row changed: the next checkpoint is a full one (and
            // the log grows enough to start it).
            rt.block_on(async {
                let client = Cluster::connect(&cluster.mgmd_addr).await.expect("connect");
                let mut i = 0;
                while i < 60 {
                    match upsert_batch(&client, i * 500, 500).await {
                        Ok(()) => i += 1,
                        // The log filled before a checkpoint freed it (a
                        // slow machine): a temporary error, retried as
                        // the node asks once the checkpoint frees space.
                        Err(e) if e.code == ErrorCode::RedoLogFull => {
                            assert!(std::time::Instant::now() < deadline, "rewrite: {e}");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(e) => panic!("rewrite: {e}"),
                    }
                }
            });
            rewritten = std::time::Instant::now();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // The log line comes as the record is handed to the writer: wait
    // until the sysfile on disk names such a checkpoint, or a restart
    // would not read it at all. The newest it names is taken: checkpoints
    // go on meanwhile (the rewrites grew the log), and a later full one
    // may have taken the place of the first.
    let dir = cluster.data_dir().join("datanode-2");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let id = loop {
        let named = std::fs::read(dir.join("sysfile"))
            .ok()
            .and_then(|b| shoal_storage::sysfile::Sysfile::read(&b).ok().flatten())
            .and_then(|s| {
                full_ids(&cluster.log("datanode-2.log"))
                    .into_iter()
                    .rev()
                    .find(|&id| s.lcp.first <= id && id <= s.lcp.last)
            });
        if let Some(id) = named {
            break id;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "node 2's sysfile never named its full checkpoint {:?}\n{}",
            full_ids(&cluster.log("datanode-2.log")),
            cluster.log("datanode-2.log")
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut node2 = cluster.datanodes[1].take().expect("node 2 runs");
    node2.kill().expect("kill -9 node 2");
    node2.wait().expect("reap node 2");
    // One byte flipped past the first 8 MiB piece a start reads: it has
    // applied the rows before when it finds the damage.
    let path = dir.join(format!("lcp-{id:08}.ckpt"));
    let mut bytes = std::fs::read(&path).expect("read checkpoint");
    let at = (8 << 20) + 100_000;
    assert!(bytes.len() > at + 4096, "{} bytes", bytes.len());
    bytes[at] ^= 0x5a;
    std::fs::write(&path, &bytes).expect("write checkpoint");
    let before = cluster.log("datanode-2.log").len();
    cluster.datanodes[1] = Some(cluster.spawn_datanode(2));
    cluster.wait_started();
    let log = cluster.log("datanode-2.log");
    let since_restart = &log[before.min(log.len())..];
    assert!(
        since_restart.contains("cannot be used: damaged at byte")
            && since_restart.contains("moved aside")
            && since_restart.contains("copying every row"),
        "{since_restart}"
    );
    let aside = std::fs::read_dir(&dir)
        .expect("data dir")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".damaged-"))
        .count();
    assert!(aside >= 1, "no file moved aside");
    cluster.verify_replicas();
    cluster.assert_alive();
}

/// A data node whose files are of an earlier life of the cluster (the
/// cluster was started empty with `--initial` while it was down) keeps
/// none of its rows when it joins: epochs and row ids began again, so its
/// rows are not these. It says so and copies every row.
#[test]
fn a_node_with_files_of_an_earlier_cluster_life_copies_every_row() {
    let mut cluster = TestCluster::start_nodes(3, 3, |c| {
        c.heartbeat_interval_ms = 250;
        c.start_partial_timeout_ms = 1000;
    });
    let rt = runtime();
    rt.block_on(async {
        let client = Cluster::connect(&cluster.mgmd_addr).await.expect("connect");
        client
            .create_table(counts_table())
            .await
            .expect("create table");
        write_rows(&client, 0..5_000, Some(1)).await;
    });
    std::thread::sleep(Duration::from_millis(500));
    stop_all(&mut cluster, libc::SIGKILL);
    // The cluster starts again empty, on nodes 1 and 2 (a majority).
    cluster.start_mgmd();
    cluster.datanodes[0] = Some(cluster.spawn_datanode_with(1, &["--initial"]));
    cluster.datanodes[1] = Some(cluster.spawn_datanode_with(2, &["--initial"]));
    rt.block_on(async {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let made = async {
                let client = Cluster::connect(&cluster.mgmd_addr).await?;
                match client.create_table(counts_table()).await {
                    Err(e) if e.code != ErrorCode::TableExists => return Err(e),
                    _ => {}
                }
                write_rows(&client, 0..3_000, Some(2)).await;
                Ok::<(), ShoalError>(())
            };
            match made.await {
                Ok(()) => break,
                Err(e) => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "nodes 1 and 2 never served: {e}\n{}",
                        cluster.logs()
                    );
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            }
        }
    });
    let before = cluster.log("datanode-3.log").len();
    cluster.datanodes[2] = Some(cluster.spawn_datanode(3));
    cluster.wait_started();
    let log = cluster.log("datanode-3.log");
    let since_restart = &log[before.min(log.len())..];
    assert!(
        since_restart.contains("copying every row")
            && since_restart.contains("another cluster history"),
        "{since_restart}"
    );
    cluster.verify_replicas();
    rt.block_on(async {
        let client = Cluster::connect(&cluster.mgmd_addr).await.expect("connect");
        expect_values(
            &client,
            &[
                (10, Some(2)),
                (2_999, Some(2)),
                (3_000, None),
                (4_999, None),
            ],
        )
        .await;
    });
}
