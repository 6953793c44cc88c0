//! sysbench 1.0's OLTP workloads (installed by the test command) against a
//! `shoal sql` node on two data nodes with two replicas: prepare, a short
//! run of each of `oltp_point_select`, `oltp_read_only` and
//! `oltp_read_write` with several threads, cleanup — with no error (the
//! read-only workloads without a single retry; read_write's rare deadlock
//! retries bounded), and the tables whole afterwards (read_write deletes
//! and re-inserts rows by their ids, so every id is back when it ends).

mod common;

use common::sql_node::{query, start_sql};
use common::TestCluster;
use std::process::Command;

const TABLES: u32 = 2;
const SIZE: u32 = 2000;

/// Runs sysbench `workload` `command` against the SQL node on `port`; its
/// output, which must report success.
fn sysbench(port: u16, workload: &str, command: &str, extra: &[&str]) -> String {
    let out = Command::new("sysbench")
        .arg(workload)
        .args([
            "--db-driver=mysql",
            "--mysql-host=127.0.0.1",
            "--mysql-user=root",
        ])
        .arg(format!("--mysql-port={port}"))
        .args(["--mysql-db=sbtest", "--rand-type=uniform"])
        .arg(format!("--tables={TABLES}"))
        .arg(format!("--table-size={SIZE}"))
        .args(extra)
        .arg(command)
        .output()
        .unwrap_or_else(|e| {
            panic!("running sysbench: {e} (scripts/test.sh installs it: apt-get install sysbench)")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && !text.contains("FATAL"),
        "sysbench {workload} {command} failed:\n{text}"
    );
    text
}

/// A figure of sysbench's summary, as `label:   N  (…)`.
fn figure(report: &str, label: &str) -> u64 {
    report
        .lines()
        .find_map(|l| l.trim().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no '{label}' in the sysbench report:\n{report}"))
}

#[test]
fn sysbench_oltp_workloads_run_without_errors() {
    let cluster = TestCluster::start_nodes(2, 2, |_| {});
    let sql = start_sql(&cluster);
    let p = sql.port;
    query(p, None, "CREATE DATABASE sbtest");
    sysbench(p, "oltp_read_write", "prepare", &[]);
    for t in 1..=TABLES {
        assert_eq!(
            query(
                p,
                Some("sbtest"),
                &format!("SELECT COUNT(*), MIN(id), MAX(id) FROM sbtest{t}")
            ),
            format!("{SIZE}\t1\t{SIZE}\n"),
            "sbtest{t} after prepare"
        );
    }
    for workload in ["oltp_point_select", "oltp_read_only", "oltp_read_write"] {
        let report = sysbench(p, workload, "run", &["--threads=4", "--time=4"]);
        assert!(
            figure(&report, "transactions:") > 0,
            "{workload} did no transaction:\n{report}"
        );
        // sysbench retries a transaction that met a deadlock or a lock
        // wait timeout (1213, 1205), as a MySQL application would; only
        // read_write takes locks, and its transactions rarely meet.
        let ignored = figure(&report, "ignored errors:");
        if workload == "oltp_read_write" {
            assert!(
                ignored * 100 <= figure(&report, "transactions:"),
                "{workload}: {ignored} retried transactions:\n{report}"
            );
        } else {
            assert_eq!(ignored, 0, "{workload}:\n{report}");
        }
    }
    for t in 1..=TABLES {
        assert_eq!(
            query(
                p,
                Some("sbtest"),
                &format!("SELECT COUNT(*), MIN(id), MAX(id) FROM sbtest{t}")
            ),
            format!("{SIZE}\t1\t{SIZE}\n"),
            "sbtest{t} after the runs"
        );
    }
    sysbench(p, "oltp_read_write", "cleanup", &[]);
    assert_eq!(query(p, Some("sbtest"), "SHOW TABLES"), "");
    cluster.verify_replicas();
}
