//! A real JDBC driver against the SQL node: `shoal sql` as a process on a
//! cluster of two data nodes, driven by tests/java/JdbcCheck.java with
//! MariaDB Connector/J and server-side prepared statements (typed
//! parameters with setString/setInt/setNull, generated keys, batches,
//! NULL read back through wasNull), a transaction rolled back and one
//! committed (seen from a second connection), and a duplicate key as an
//! SQLException with code 1062 that leaves the connection usable. The
//! program compares every value it reads back and exits non-zero on the
//! first mismatch.
//!
//! The driver comes from `$SHOAL_TEST_JDBC_JAR`, the jar that
//! scripts/test.sh fetches from Maven Central at a pinned version; the
//! program runs in Java's source-file mode (`java -cp JAR File.java`), so
//! there is no separate compile step. Without the jar the test fails
//! rather than skips, so CI cannot pass without running the driver.

mod common;

use common::sql_node::start_sql;
use common::TestCluster;
use std::path::Path;
use std::process::Command;

#[test]
fn mariadb_connector_j_runs_prepared_statements_and_a_transaction_through_an_sql_node() {
    let jar = common::provided_by_test_script(
        "SHOAL_TEST_JDBC_JAR",
        "fetches MariaDB Connector/J into target/jdbc with mvn",
    );
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/JdbcCheck.java");
    let cluster = TestCluster::start_nodes(2, 2, |_| {});
    let sql = start_sql(&cluster);

    let out = Command::new("java")
        .arg("-cp")
        .arg(&jar)
        .arg(&program)
        .arg(sql.port.to_string())
        .output()
        .unwrap_or_else(|e| {
            panic!("running java: {e} (the JDBC test needs a Java 17+ JDK: apt-get install openjdk-17-jdk-headless)")
        });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- sql node log\n{}",
        program.display(),
        out.status,
        sql.log()
    );
    // The program ran to its end, not an early exit 0.
    assert!(
        stdout.lines().any(|l| l == "jdbc: ok"),
        "no \"jdbc: ok\" in the program's output:\n{stdout}\n{stderr}"
    );
}
