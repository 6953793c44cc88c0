//! Real Python MySQL clients against the SQL node: `shoal sql` as a
//! process on a cluster of two data nodes, driven by
//! tests/python/clients.py with PyMySQL (text protocol, client-side
//! escaping, transactions, error classes) and mysql-connector-python in
//! pure-Python mode (server-side prepared statements: NULL parameters, a
//! parameter in LIMIT, aggregates, GROUP BY). The script compares every
//! value it reads back and exits non-zero on the first mismatch.
//!
//! The interpreter comes from `$SHOAL_TEST_PYTHON`, the venv that
//! scripts/test.sh makes with both clients pinned; without it the test
//! fails rather than skips, so CI cannot pass without running the clients.

mod common;

use common::sql_node::start_sql;
use common::TestCluster;
use std::path::Path;
use std::process::Command;

#[test]
fn pymysql_and_mysql_connector_python_run_their_checks_through_an_sql_node() {
    let python = common::provided_by_test_script(
        "SHOAL_TEST_PYTHON",
        "makes a venv with PyMySQL and mysql-connector-python at target/pyenv",
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/clients.py");
    let cluster = TestCluster::start_nodes(2, 2, |_| {});
    let sql = start_sql(&cluster);

    let out = Command::new(&python)
        .arg(&script)
        .arg(sql.port.to_string())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- sql node log\n{}",
        script.display(),
        out.status,
        sql.log()
    );
    // Both clients reported: the script ran to its end, not an early exit 0.
    for client in ["PyMySQL: ok", "mysql-connector-python: ok"] {
        assert!(
            stdout.lines().any(|l| l == client),
            "no {client:?} in the script's output:\n{stdout}\n{stderr}"
        );
    }
}
