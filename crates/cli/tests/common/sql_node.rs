//! An SQL node for integration tests: `shoal sql` as a child process on a
//! [`TestCluster`](super::TestCluster), and the stock `mariadb` client
//! (installed by the test command) to talk to it.

use super::{free_port, TestCluster, SHOAL};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A `shoal sql` process; killed when dropped.
pub struct SqlNode {
    child: Child,
    pub port: u16,
    log_path: std::path::PathBuf,
}

impl Drop for SqlNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl SqlNode {
    /// Whether the process still runs (it has not exited or crashed).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// What the process printed so far (its own log file).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}

pub fn start_sql(cluster: &TestCluster) -> SqlNode {
    start_sql_with(cluster, &[])
}

/// [`start_sql`] with more of `shoal sql`'s flags.
pub fn start_sql_with(cluster: &TestCluster, flags: &[&str]) -> SqlNode {
    let port = free_port();
    let log_path = cluster.dir.path().join(format!("sql-{port}.log"));
    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new(SHOAL)
        .args([
            "sql",
            "--connect",
            &cluster.mgmd_addr,
            "--port",
            &port.to_string(),
        ])
        .args(flags)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start shoal sql");
    let mut node = SqlNode {
        child,
        port,
        log_path,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !greets(port) {
        assert!(
            node.is_running(),
            "shoal sql exited before it listened: {}",
            node.log()
        );
        assert!(
            Instant::now() < deadline,
            "shoal sql did not listen within 30 s: {}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    node
}

/// Whether a MySQL server listens on `port`: it sends its greeting (a
/// packet of protocol version 10). A bare TCP connect is not enough: it
/// can reach a probe's own socket or another test's short-lived listener.
fn greets(port: u16) -> bool {
    use std::io::Read;
    let Some(mut stream) = super::connect_to_listener(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = [0u8; 5];
    stream.read_exact(&mut head).is_ok() && head[4] == 10
}

/// Runs `sql` with the `mariadb` client (batch mode: tab-separated rows,
/// no headers). The test command installs the client.
pub fn mariadb(port: u16, database: Option<&str>, sql: &str) -> Output {
    let mut cmd = Command::new("mariadb");
    cmd.args(["--protocol=tcp", "-h", "127.0.0.1", "-P", &port.to_string()])
        .args(["-u", "root", "--batch", "--skip-column-names"]);
    if let Some(db) = database {
        cmd.args(["-D", db]);
    }
    match cmd.args(["-e", sql]).output() {
        Ok(out) => out,
        Err(e) => panic!(
            "running the mariadb client: {e} (scripts/test.sh installs it: apt-get install mariadb-client)"
        ),
    }
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `sql`, which must succeed; its output.
pub fn query(port: u16, database: Option<&str>, sql: &str) -> String {
    let out = mariadb(port, database, sql);
    assert!(out.status.success(), "{sql}: {}", stderr(&out));
    stdout(&out)
}

/// Runs `sql`, which must fail with MySQL error `code`.
pub fn fails(port: u16, database: Option<&str>, sql: &str, code: u16) -> String {
    let out = mariadb(port, database, sql);
    let err = stderr(&out);
    assert!(!out.status.success(), "{sql} succeeded: {}", stdout(&out));
    assert!(err.contains(&format!("ERROR {code}")), "{sql}: {err}");
    err
}
