//! End to end against real processes: `shoal mgmd` + `shoal datanode` on
//! free 127.0.0.1 ports, driven by the native client, `shoal mgm` and
//! `shoal bench`; and `shoal up` started and stopped like a user would.

mod common;

use common::{free_port, runtime, TestCluster, SHOAL};
use shoal_client::{
    Cluster, ColumnDef, ColumnType, ErrorClass, ErrorCode, ExecType, LockMode, TableDef,
    Transaction, Value,
};
use std::time::{Duration, Instant};

#[test]
fn mgm_show_and_wait() {
    let cluster = TestCluster::start();
    let out = cluster.shoal(&["mgm", "--connect", &cluster.mgmd_addr, "-e", "show"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("started"), "show lists node states:\n{text}");
    assert!(
        text.to_lowercase().contains("memory"),
        "show lists memory:\n{text}"
    );
    let out = cluster.shoal(&[
        "mgm",
        "--connect",
        &cluster.mgmd_addr,
        "wait",
        "--timeout-secs",
        "5",
    ]);
    assert!(out.status.success());
    // Nothing listening: wait fails instead of hanging.
    let nowhere = format!("127.0.0.1:{}", free_port());
    let out = cluster.shoal(&["mgm", "--connect", &nowhere, "wait", "--timeout-secs", "1"]);
    assert!(!out.status.success());
}

#[test]
fn every_column_type_round_trips() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let c = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let cols = vec![
            ColumnDef::new("k1", ColumnType::Int { unsigned: false }),
            ColumnDef::new("k2", ColumnType::VarChar(20)),
            ColumnDef::new("ti", ColumnType::TinyInt { unsigned: false }),
            ColumnDef::new("tu", ColumnType::TinyInt { unsigned: true }),
            ColumnDef::new("si", ColumnType::SmallInt { unsigned: false }),
            ColumnDef::new("su", ColumnType::SmallInt { unsigned: true }),
            ColumnDef::new("iu", ColumnType::Int { unsigned: true }),
            ColumnDef::new("bi", ColumnType::BigInt { unsigned: false }),
            ColumnDef::new("bu", ColumnType::BigInt { unsigned: true }),
            ColumnDef::new("f", ColumnType::Float),
            ColumnDef::new("d", ColumnType::Double),
            ColumnDef::new("ch", ColumnType::Char(8)),
            ColumnDef::new("bin", ColumnType::Binary(4)),
            ColumnDef::new("vb", ColumnType::VarBinary(8000)).nullable(),
            ColumnDef::new("ts", ColumnType::Timestamp),
            ColumnDef::new("dt", ColumnType::DateTime),
            ColumnDef::new("dflt", ColumnType::Int { unsigned: false })
                .default_value(Value::Int(42)),
            ColumnDef::new("maybe", ColumnType::VarChar(5)).nullable(),
        ];
        let t = c
            .create_table(TableDef::new("types", cols, &["k1", "k2"]).unwrap())
            .await
            .unwrap();
        let big = vec![0xAB; 8000];
        let values = vec![
            Value::Int(-7),
            Value::Str("key two".into()),
            Value::Int(-128),
            Value::UInt(255),
            Value::Int(-32768),
            Value::UInt(65535),
            Value::UInt(u64::from(u32::MAX)),
            Value::Int(i64::MIN),
            Value::UInt(u64::MAX),
            Value::Float(1.5),
            Value::Double(-2.25e300),
            Value::Str("abc".into()),
            Value::Bytes(vec![1, 2, 3, 4]),
            Value::Bytes(big.clone()),
            Value::Timestamp(1_700_000_000),
            Value::DateTime(-1_000_000_000),
        ];
        let names: Vec<&str> = t.def().columns[..16]
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        let rec = t.record(&names).unwrap();
        let mut tx = c.transaction();
        tx.insert(&rec, &values).unwrap();
        tx.execute(ExecType::Commit).await.unwrap();

        let all = t.full_record();
        let mut tx = c.transaction();
        let op = tx
            .read(
                &all,
                &[Value::Int(-7), Value::Str("key two".into())],
                LockMode::Shared,
            )
            .unwrap();
        tx.execute(ExecType::Commit).await.unwrap();
        let row = tx.row(op).expect("the row");
        for (i, v) in values.iter().enumerate() {
            assert_eq!(
                row.get_idx(i as u16).as_ref(),
                Some(v),
                "column {}",
                names[i]
            );
        }
        assert_eq!(row.get("dflt"), Some(Value::Int(42)), "default applied");
        assert_eq!(
            row.get("maybe"),
            Some(Value::Null),
            "nullable column without default is NULL"
        );

        // The row's buffer read into again and again: through the same
        // record (the buffer keeps it, nothing is cloned), through
        // another record of the table, and back.
        let key = [Value::Int(-7), Value::Str("key two".into())];
        let mut buf = tx.take_row(op).expect("the row");
        for (round, record) in [&all, &all, &rec, &all].into_iter().enumerate() {
            let mut tx = c.transaction();
            let op = tx
                .read_into(record, &key, LockMode::CommittedRead, buf)
                .unwrap();
            tx.execute(ExecType::Commit).await.unwrap();
            buf = tx
                .take_row(op)
                .unwrap_or_else(|| panic!("round {round}: no row"));
            assert_eq!(buf.len(), record.columns().len(), "round {round}");
            for (i, v) in values.iter().enumerate() {
                assert_eq!(buf.get_idx(i as u16).as_ref(), Some(v), "round {round}");
            }
        }
        // A reused buffer whose read finds no row: no row, the error kept.
        let mut tx = c.transaction();
        let missing = [Value::Int(-8), Value::Str("none".into())];
        let op = tx
            .read_into(&all, &missing, LockMode::CommittedRead, buf)
            .unwrap();
        tx.ignore_error(op);
        tx.execute(ExecType::Commit).await.unwrap();
        assert!(tx.row(op).is_none() && tx.take_row(op).is_none());
        assert_eq!(
            tx.op_error(op).map(|e| e.code),
            Some(ErrorCode::TupleNotFound),
            "{:?}",
            tx.op_error(op)
        );
    });
}

#[test]
fn transactions_commit_rollback_errors_and_locks() {
    let cluster = TestCluster::start_with(|c| c.deadlock_timeout_ms = 300);
    let rt = runtime();
    rt.block_on(async {
        let c = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let def = TableDef::new(
            "acct",
            vec![
                ColumnDef::new("id", ColumnType::Int { unsigned: true }),
                ColumnDef::new("bal", ColumnType::BigInt { unsigned: false }),
            ],
            &["id"],
        )
        .unwrap();
        let t = c.create_table(def.clone()).await.unwrap();
        assert_eq!(
            c.create_table(def).await.unwrap_err().code,
            ErrorCode::TableExists
        );
        let rec = t.full_record();
        let row = |id: u64, bal: i64| [Value::UInt(id), Value::Int(bal)];
        let balance = |c: Cluster, id: u64| {
            let rec = rec.clone();
            async move {
                let mut tx = c.transaction();
                let op = tx
                    .read(&rec, &[Value::UInt(id)], LockMode::CommittedRead)
                    .unwrap();
                tx.ignore_error(op);
                tx.execute(ExecType::Commit).await.unwrap();
                tx.row(op).and_then(|r| r.get("bal"))
            }
        };

        // NoCommit, then Commit in a second round trip.
        let mut tx = c.transaction();
        tx.insert(&rec, &row(1, 100)).unwrap();
        tx.execute(ExecType::NoCommit).await.unwrap();
        tx.insert(&rec, &row(2, 50)).unwrap();
        tx.execute(ExecType::Commit).await.unwrap();
        assert_eq!(balance(c.clone(), 1).await, Some(Value::Int(100)));

        // Rollback leaves no trace.
        let mut tx = c.transaction();
        tx.update(&rec, &row(1, 0)).unwrap();
        tx.insert(&rec, &row(3, 3)).unwrap();
        tx.execute(ExecType::NoCommit).await.unwrap();
        tx.execute(ExecType::Rollback).await.unwrap();
        assert_eq!(balance(c.clone(), 1).await, Some(Value::Int(100)));
        assert_eq!(balance(c.clone(), 3).await, None);

        // Errors: duplicate insert aborts the whole transaction.
        let mut tx = c.transaction();
        tx.update(&rec, &row(2, 0)).unwrap();
        tx.insert(&rec, &row(1, 1)).unwrap();
        let e = tx.execute(ExecType::Commit).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::TupleAlreadyExists);
        assert_eq!(e.class(), ErrorClass::Permanent);
        assert_eq!(balance(c.clone(), 2).await, Some(Value::Int(50)));
        // ... unless ignored.
        let mut tx = c.transaction();
        let missing = tx.delete(&rec, &[Value::UInt(99)]).unwrap();
        tx.ignore_error(missing);
        tx.write(&rec, &row(4, 4)).unwrap();
        tx.execute(ExecType::Commit).await.unwrap();
        assert_eq!(
            tx.op_error(missing).map(|e| e.code),
            Some(ErrorCode::TupleNotFound)
        );
        assert_eq!(balance(c.clone(), 4).await, Some(Value::Int(4)));

        // A held exclusive lock: a committed read passes, a locking read
        // waits and times out with the temporary deadlock error.
        let mut holder = c.transaction();
        holder
            .read(&rec, &[Value::UInt(1)], LockMode::Exclusive)
            .unwrap();
        holder.execute(ExecType::NoCommit).await.unwrap();
        assert_eq!(balance(c.clone(), 1).await, Some(Value::Int(100)));
        let mut waiter = c.transaction();
        waiter
            .read(&rec, &[Value::UInt(1)], LockMode::Shared)
            .unwrap();
        let started = Instant::now();
        let e = waiter.execute(ExecType::Commit).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::DeadlockTimeout);
        assert_eq!(e.class(), ErrorClass::Temporary);
        assert!(started.elapsed() >= Duration::from_millis(250));
        holder.update(&rec, &row(1, 101)).unwrap();
        holder.execute(ExecType::Commit).await.unwrap();
        assert_eq!(balance(c.clone(), 1).await, Some(Value::Int(101)));

        // Two transactions locking two rows in opposite order: one gets the
        // deadlock timeout, the other commits.
        let mut a = c.transaction();
        a.read(&rec, &[Value::UInt(1)], LockMode::Exclusive)
            .unwrap();
        a.execute(ExecType::NoCommit).await.unwrap();
        let mut b = c.transaction();
        b.read(&rec, &[Value::UInt(2)], LockMode::Exclusive)
            .unwrap();
        b.execute(ExecType::NoCommit).await.unwrap();
        a.update(&rec, &row(2, 7)).unwrap();
        b.update(&rec, &row(1, 7)).unwrap();
        let (ra, rb) = tokio::join!(a.execute(ExecType::Commit), b.execute(ExecType::Commit));
        let codes = [ra.err().map(|e| e.code), rb.err().map(|e| e.code)];
        assert!(
            codes.contains(&Some(ErrorCode::DeadlockTimeout)),
            "{codes:?}"
        );
        assert!(codes.contains(&None), "one of them commits: {codes:?}");
    });
}

#[test]
fn dropped_and_recreated_tables_give_clear_errors() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let c = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let def = TableDef::new(
            "d",
            vec![ColumnDef::new("id", ColumnType::Int { unsigned: true })],
            &["id"],
        )
        .unwrap();
        let old = c.create_table(def.clone()).await.unwrap();
        let rec = old.full_record();
        let mut tx = c.transaction();
        tx.insert(&rec, &[Value::UInt(1)]).unwrap();
        tx.execute(ExecType::Commit).await.unwrap();
        c.drop_table("d").await.unwrap();
        assert_eq!(c.table("d").await.unwrap_err().code, ErrorCode::NoSuchTable);
        let mut tx = c.transaction();
        tx.insert(&rec, &[Value::UInt(2)]).unwrap();
        let e = tx.execute(ExecType::Commit).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::NoSuchTable, "{e}");
        // Re-created under the same name: a new id and version; the old
        // handle is stale, the new one starts empty.
        let new = c.create_table(def).await.unwrap();
        assert!(new.id() != old.id() || new.version() != old.version());
        let mut tx = c.transaction();
        tx.insert(&rec, &[Value::UInt(2)]).unwrap();
        let e = tx.execute(ExecType::Commit).await.unwrap_err();
        assert!(
            matches!(
                e.code,
                ErrorCode::NoSuchTable | ErrorCode::InvalidSchemaVersion
            ),
            "{e}"
        );
        let mut tx = c.transaction();
        let op = tx
            .read(
                &new.full_record(),
                &[Value::UInt(1)],
                LockMode::CommittedRead,
            )
            .unwrap();
        tx.ignore_error(op);
        tx.execute(ExecType::Commit).await.unwrap();
        assert!(tx.row(op).is_none(), "rows of the dropped table are gone");
    });
}

#[test]
fn thousands_of_transactions_in_flight_from_one_thread() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let c = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let def = TableDef::new(
            "many",
            vec![
                ColumnDef::new("id", ColumnType::Int { unsigned: true }),
                ColumnDef::new("v", ColumnType::Int { unsigned: true }),
            ],
            &["id"],
        )
        .unwrap();
        let rec = c.create_table(def).await.unwrap().full_record();
        let n = 10_000u64;
        let inserts = (0..n).map(|i| {
            let c = c.clone();
            let rec = rec.clone();
            async move {
                let mut tx = c.transaction();
                tx.insert(&rec, &[Value::UInt(i), Value::UInt(i * 2)])
                    .unwrap();
                tx.execute(ExecType::Commit).await
            }
        });
        for r in futures::future::join_all(inserts).await {
            r.unwrap();
        }
        let reads = (0..n).map(|i| {
            let c = c.clone();
            let rec = rec.clone();
            async move {
                let mut tx = c.transaction();
                let op = tx
                    .read(&rec, &[Value::UInt(i)], LockMode::CommittedRead)
                    .unwrap();
                tx.execute(ExecType::Commit).await.unwrap();
                tx.row(op).and_then(|r| r.get("v"))
            }
        });
        for (i, v) in futures::future::join_all(reads)
            .await
            .into_iter()
            .enumerate()
        {
            assert_eq!(v, Some(Value::UInt(i as u64 * 2)));
        }
    });
    let status = cluster.wait_for_status(|s| s.rows == 10_000);
    assert_eq!(status.rows, 10_000);
}

#[test]
fn execute_all_answers_each_transaction_in_order() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let c = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let def = TableDef::new(
            "batch",
            vec![ColumnDef::new("id", ColumnType::Int { unsigned: true })],
            &["id"],
        )
        .unwrap();
        let rec = c.create_table(def).await.unwrap().full_record();
        let mut setup = c.transaction();
        setup.insert(&rec, &[Value::UInt(7)]).unwrap();
        setup.execute(ExecType::Commit).await.unwrap();

        // 1000 inserts, one of them a duplicate, then reads of them all.
        let mut txns: Vec<Transaction> = (0..1000u64)
            .map(|i| {
                let mut tx = c.transaction();
                tx.insert(&rec, &[Value::UInt(i)]).unwrap();
                tx
            })
            .collect();
        let results = Transaction::execute_all(&mut txns, ExecType::Commit).await;
        assert_eq!(results.len(), 1000);
        for (i, r) in results.iter().enumerate() {
            match i {
                7 => assert_eq!(r.as_ref().unwrap_err().code, ErrorCode::TupleAlreadyExists),
                _ => assert!(r.is_ok(), "insert {i}: {r:?}"),
            }
        }
        let mut reads = Vec::new();
        let mut ops = Vec::new();
        for i in 0..1000u64 {
            let mut tx = c.transaction();
            ops.push(
                tx.read(&rec, &[Value::UInt(i)], LockMode::CommittedRead)
                    .unwrap(),
            );
            reads.push(tx);
        }
        for r in Transaction::execute_all(&mut reads, ExecType::Commit).await {
            r.unwrap();
        }
        for (i, (tx, op)) in reads.iter().zip(ops).enumerate() {
            assert_eq!(
                tx.row(op).and_then(|r| r.get("id")),
                Some(Value::UInt(i as u64))
            );
        }
    });
}

#[test]
fn flexasynch_runs_and_prints_ndb_lines() {
    let cluster = TestCluster::start();
    let out = cluster.shoal(&[
        "bench",
        "flexasynch",
        "-t",
        "2",
        "-p",
        "16",
        "-c",
        "2",
        "-o",
        "10",
        "-l",
        "2",
        "-a",
        "3",
        "-s",
        "2",
        "-r",
        "1",
        "-con",
        "2",
        "--connect",
        &cluster.mgmd_addr,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    for phase in ["insert", "update", "delete", "read"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{phase} average: ")))
            .unwrap_or_else(|| panic!("no {phase} line in:\n{stdout}"));
        // `insert average: 461584/s min: 451928/s max: 474254/s stddev: 2%`
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words.len(), 9, "{line}");
        assert_eq!(
            (words[1], words[3], words[5], words[7]),
            ("average:", "min:", "max:", "stddev:"),
            "{line}"
        );
        for w in [words[2], words[4], words[6]] {
            let n: u64 = w
                .strip_suffix("/s")
                .unwrap_or_else(|| panic!("{line}"))
                .parse()
                .unwrap();
            assert!(n > 0, "{line}");
        }
        assert!(words[8].ends_with('%'), "{line}");
    }
    let out = cluster.shoal(&[
        "bench",
        "flexasynch",
        "-p",
        "8",
        "-o",
        "5",
        "-a",
        "2",
        "--latency",
        "--json",
        "--connect",
        &cluster.mgmd_addr,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("--json prints one JSON object");
    let phases = json["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 4);
    assert!(phases
        .iter()
        .all(|p| p["average"].as_f64().unwrap() > 0.0 && p["latency_p99_us"].as_f64().is_some()));
    // The rows are gone at the end (the delete phase ran).
    assert_eq!(cluster.datanode_status().rows, 0);
}

/// testReadPerf's eight cases end to end on a small table, with the
/// client polling its sockets before it sleeps (`--spin-us`): every case
/// prints its line, and spinning changes no answer (readperf checks the
/// rows each case reads).
#[test]
fn readperf_runs_every_case_with_a_spinning_client() {
    let cluster = TestCluster::start();
    let out = cluster.shoal(&[
        "bench",
        "readperf",
        "-c",
        "-d",
        "-s",
        "3000",
        "-r",
        "100",
        "-i",
        "1",
        "--seed",
        "5",
        "--spin-us",
        // Long enough that a loaded machine's answers still come within it.
        "500",
        "--connect",
        &cluster.mgmd_addr,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases = [
        "serial pk",
        "batch pk",
        "serial unique",
        "batch unique",
        "index eq-bound",
        "index range",
        "index ordered",
        "interpreted scan",
    ];
    for case in cases {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{case} avg: ")))
            .unwrap_or_else(|| panic!("no {case} line in:\n{stdout}"));
        assert!(line.ends_with("rows / sec)"), "{line}");
    }
    // The spin was in use: answers arrived while the client polled.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let seen: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("readperf: the client's spin saw "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no spin line in:\n{stderr}"));
    assert!(seen > 0, "{stderr}");
    let bad = cluster.shoal(&["bench", "readperf", "--spin-us", "10001"]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("--spin-us 10001: at most 10000"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// Process ids whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmdline).contains(needle) && pid != std::process::id() {
                pids.push(pid);
            }
        }
    }
    pids
}

#[test]
fn shoal_up_starts_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("cluster");
    let port = free_port();
    let mut up = std::process::Command::new(SHOAL)
        .args([
            "up",
            "--data-dir",
            data_dir.to_str().unwrap(),
            "--mgm-port",
            &port.to_string(),
            "--data-memory",
            "64M",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let addr = format!("127.0.0.1:{port}");
    let waited = std::process::Command::new(SHOAL)
        .args(["mgm", "--connect", &addr, "wait", "--timeout-secs", "30"])
        .output()
        .unwrap();
    assert!(
        waited.status.success(),
        "{}",
        String::from_utf8_lossy(&waited.stderr)
    );
    let needle = data_dir.to_str().unwrap().to_string();
    assert!(
        !processes_mentioning(&needle).is_empty() || !processes_mentioning(&addr).is_empty(),
        "children are running"
    );
    // A client works against it.
    runtime().block_on(async {
        let c = Cluster::connect(&addr).await.unwrap();
        let def = TableDef::new(
            "up",
            vec![ColumnDef::new("id", ColumnType::Int { unsigned: true })],
            &["id"],
        )
        .unwrap();
        c.create_table(def).await.unwrap();
    });
    unsafe { libc::kill(up.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = up.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "shoal up did not stop within 15 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = up.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&addr),
        "up prints the connect string:\n{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "{status}\n{stdout}\n{stderr}");
    // Every child stopped on its SIGTERM; none needed the SIGKILL fallback.
    assert!(!stderr.contains("did not stop in time"), "{stderr}");
    // No orphans: nothing still runs with our data dir or mgmd address.
    std::thread::sleep(Duration::from_millis(200));
    let left: Vec<u32> = processes_mentioning(&needle)
        .into_iter()
        .chain(processes_mentioning(&addr))
        .collect();
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
