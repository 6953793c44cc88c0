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
use std::path::{Path, PathBuf};
use std::process::Command;

/// The venv's interpreter, which must exist.
fn python() -> PathBuf {
    let Some(path) = std::env::var_os("SHOAL_TEST_PYTHON") else {
        panic!(
            "SHOAL_TEST_PYTHON is not set: run the tests with scripts/test.sh, which makes a \
             venv with PyMySQL and mysql-connector-python at target/pyenv and sets it \
             (or set SHOAL_TEST_PYTHON=target/pyenv/bin/python after running its pyenv step)"
        );
    };
    let path = PathBuf::from(path);
    // Relative to the workspace root, where the variable is usually set;
    // cargo runs the test in the crate's directory.
    let path = if path.is_relative() {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(path)
    } else {
        path
    };
    assert!(
        path.is_file(),
        "SHOAL_TEST_PYTHON={} does not exist: scripts/test.sh makes it (the venv at target/pyenv)",
        path.display()
    );
    path
}

#[test]
fn pymysql_and_mysql_connector_python_run_their_checks_through_an_sql_node() {
    let python = python();
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
        cluster.log("sql")
    );
    // Both clients reported: the script ran to its end, not an early exit 0.
    for client in ["PyMySQL: ok", "mysql-connector-python: ok"] {
        assert!(
            stdout.lines().any(|l| l == client),
            "no {client:?} in the script's output:\n{stdout}\n{stderr}"
        );
    }
}
