//! A private MariaDB server for tests that compare Shoal with it:
//! `mariadbd` from the Debian package (the test command installs it) on a
//! free 127.0.0.1 port, with a data dir and socket of its own in a
//! temporary directory, so it neither needs nor touches a system service
//! (port 3306, /run/mysqld). Dropping it kills the server.
//!
//! The data dir starts empty and the server runs with
//! `--skip-grant-tables`: InnoDB makes its files at start (a fraction of a
//! second), where `mariadb-install-db` would take seconds to make grant
//! tables that a server open to root without a password does not need.

use super::free_port;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The SQL mode Shoal's SQL node runs with (MySQL 8's default), so both
/// servers judge the same statements by the same rules.
pub const SQL_MODE: &str = "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,\
                            ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION";

/// How long the server may take to answer its first query.
const START_TIMEOUT_S: u64 = 60;

/// A running `mariadbd`; killed when dropped.
pub struct MariaDbServer {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `mariadbd`: on PATH, or in the sbin directories Debian installs it to
/// (which a non-root user's PATH may lack).
fn mariadbd() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join("mariadbd"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "mariadbd not found: run the tests with scripts/test.sh, which installs it \
                 (apt-get install mariadb-server)"
            )
        })
}

impl MariaDbServer {
    /// Starts the server and waits until it answers a query. Strings
    /// compare by bytes (utf8mb4_bin, as Shoal's do), times are in UTC
    /// (as Shoal's are), and the SQL mode is Shoal's.
    pub fn start() -> MariaDbServer {
        let bin = mariadbd();
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        std::fs::create_dir(&data).expect("mariadbd data dir");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("mariadbd.log")).expect("log file");
        let path = |name: &str| dir.path().join(name).display().to_string();
        let mut cmd = Command::new(&bin);
        // --no-defaults first: no /etc/mysql config applies.
        cmd.arg("--no-defaults");
        // mariadbd refuses to run as root unless told to.
        // SAFETY: getuid has no preconditions and cannot fail.
        if unsafe { libc::getuid() } == 0 {
            cmd.arg("--user=root");
        }
        cmd.args([
            format!("--datadir={}", data.display()),
            format!("--socket={}", path("mariadbd.sock")),
            format!("--pid-file={}", path("mariadbd.pid")),
            format!("--port={port}"),
            "--bind-address=127.0.0.1".into(),
            "--skip-networking=0".into(),
            "--skip-grant-tables".into(),
            "--skip-name-resolve".into(),
            "--innodb-buffer-pool-size=16M".into(),
            "--innodb-log-file-size=16M".into(),
            "--character-set-server=utf8mb4".into(),
            "--collation-server=utf8mb4_bin".into(),
            "--default-time-zone=+00:00".into(),
            format!("--sql-mode={SQL_MODE}"),
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let mut server = MariaDbServer { child, port, dir };
        server.wait_ready();
        server
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(START_TIMEOUT_S);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("mariadbd exited with {status}; log:\n{}", self.log());
            }
            if super::connect_to_listener(("127.0.0.1", self.port)).is_some() {
                let out = super::sql_node::mariadb(self.port, None, "SELECT 1");
                if out.status.success() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "mariadbd did not answer on 127.0.0.1:{} within {START_TIMEOUT_S} s; log:\n{}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's own log (its errors and notes).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mariadbd.log")).unwrap_or_default()
    }

    /// A directory for the test's own files, removed with the server.
    pub fn scratch_dir(&self) -> &Path {
        self.dir.path()
    }
}
