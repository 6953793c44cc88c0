//! A real cluster for integration tests: `shoal mgmd` and `shoal datanode`
//! child processes on free 127.0.0.1 ports, in a temporary data dir.
//! Dropping it kills the processes.

#![allow(dead_code)]

pub mod mariadb_server;
pub mod raw_mysql;
pub mod sql_node;
pub mod sql_session;

use shoal_mgmd::ClusterConfig;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");

/// A free TCP port on 127.0.0.1 (bound, then released for the child).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().unwrap().port()
}

/// A connection to a listener at `addr`, if one accepts. A port from
/// [`free_port`] lies in the ephemeral range, so a probe made before the
/// server listens can be given that very port as its own source and
/// connect to itself (TCP simultaneous open): such a connection is no
/// sign of a listener and is refused here.
pub fn connect_to_listener(addr: impl std::net::ToSocketAddrs) -> Option<std::net::TcpStream> {
    let stream = std::net::TcpStream::connect(addr).ok()?;
    let to_itself = stream.local_addr().ok()? == stream.peer_addr().ok()?;
    (!to_itself).then_some(stream)
}

pub struct TestCluster {
    pub dir: tempfile::TempDir,
    pub mgmd_addr: String,
    pub config: ClusterConfig,
    mgmd: Option<Child>,
    pub datanodes: Vec<Option<Child>>,
}

impl TestCluster {
    /// One data node with default settings.
    pub fn start() -> TestCluster {
        TestCluster::start_with(|_| {})
    }

    /// One data node; `tune` adjusts the config before anything starts.
    pub fn start_with(tune: impl FnOnce(&mut ClusterConfig)) -> TestCluster {
        TestCluster::start_nodes(1, 1, tune)
    }

    /// `data_nodes` data nodes in node groups of `replicas`.
    pub fn start_nodes(
        data_nodes: u32,
        replicas: u32,
        tune: impl FnOnce(&mut ClusterConfig),
    ) -> TestCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let mut config = ClusterConfig::local(data_nodes, replicas, port, dir.path());
        config.data_memory_bytes = 64 << 20;
        tune(&mut config);
        let path = dir.path().join("config.toml");
        std::fs::write(&path, config.to_toml()).expect("write config");
        let mgmd_addr = config.mgmd_addr();
        let mgmd = spawn(
            &["mgmd", "--config", path.to_str().unwrap()],
            &dir.path().join("mgmd.log"),
        );
        let mut cluster = TestCluster {
            dir,
            mgmd_addr,
            config,
            mgmd: Some(mgmd),
            datanodes: Vec::new(),
        };
        cluster.wait_port();
        for id in 1..=data_nodes as u16 {
            let node = cluster.spawn_datanode(id);
            cluster.datanodes.push(Some(node));
        }
        cluster.wait_started();
        cluster
    }

    /// Kills mgmd with SIGKILL (its state is on disk) and waits for it to
    /// exit. The data nodes are left running.
    pub fn kill_mgmd(&mut self) {
        if let Some(mut mgmd) = self.mgmd.take() {
            let _ = mgmd.kill();
            let _ = mgmd.wait();
        }
    }

    /// Starts mgmd again after [`TestCluster::kill_mgmd`], with the same
    /// config (so the same port and data dir), and waits until it listens.
    pub fn start_mgmd(&mut self) {
        assert!(self.mgmd.is_none(), "mgmd is still running");
        let path = self.dir.path().join("config.toml");
        self.mgmd = Some(spawn(
            &["mgmd", "--config", path.to_str().unwrap()],
            &self.dir.path().join("mgmd.log"),
        ));
        self.wait_port();
    }

    pub fn spawn_datanode(&self, node_id: u16) -> Child {
        self.spawn_datanode_with(node_id, &[])
    }

    /// [`TestCluster::spawn_datanode`] with more flags (`--initial`).
    pub fn spawn_datanode_with(&self, node_id: u16, extra: &[&str]) -> Child {
        let log = self.dir.path().join(format!("datanode-{node_id}.log"));
        let id = node_id.to_string();
        let mut args = vec!["datanode", "--connect", &self.mgmd_addr, "--node-id", &id];
        args.extend_from_slice(extra);
        spawn(&args, &log)
    }

    fn wait_port(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while connect_to_listener(&self.mgmd_addr).is_none() {
            if let Some(status) = self.mgmd.as_mut().unwrap().try_wait().unwrap() {
                panic!("mgmd exited with {status}; log:\n{}", self.log("mgmd.log"));
            }
            assert!(
                Instant::now() < deadline,
                "mgmd did not listen on {}",
                self.mgmd_addr
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn wait_started(&self) {
        let out = self.shoal(&[
            "mgm",
            "--connect",
            &self.mgmd_addr,
            "wait",
            "--timeout-secs",
            "30",
        ]);
        assert!(
            out.status.success(),
            "cluster did not start: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
    }

    /// Runs `shoal ARGS` to completion.
    pub fn shoal(&self, args: &[&str]) -> std::process::Output {
        Command::new(SHOAL).args(args).output().expect("run shoal")
    }

    pub fn log(&self, name: &str) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.path().join(name)) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    pub fn logs(&self) -> String {
        let mut all = format!("--- mgmd.log\n{}", self.log("mgmd.log"));
        for id in 1..=self.datanodes.len() {
            let name = format!("datanode-{id}.log");
            all.push_str(&format!("\n--- {name}\n{}", self.log(&name)));
        }
        all
    }

    /// Every data node's last reported status, by node id.
    pub fn statuses(&self) -> Vec<(u16, shoal_mgmd::NodeStatus)> {
        runtime().block_on(async {
            let mut c = shoal_mgmd::MgmClient::connect(&self.mgmd_addr)
                .await
                .unwrap();
            c.show()
                .await
                .unwrap()
                .nodes
                .into_iter()
                .filter(|n| n.kind == "datanode")
                .map(|n| (n.node_id, n.status.expect("a status")))
                .collect()
        })
    }

    /// Polls until every data node's status satisfies `ready` (statuses
    /// come about once a second) or 10 s pass; returns the last ones.
    pub fn wait_for_all(
        &self,
        ready: impl Fn(u16, &shoal_mgmd::NodeStatus) -> bool,
    ) -> Vec<(u16, shoal_mgmd::NodeStatus)> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let all = self.statuses();
            if all.iter().all(|(id, s)| ready(*id, s)) || Instant::now() > deadline {
                return all;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The data node's live address and the cluster id, from mgmd.
    pub fn datanode_addr(&self) -> (String, u64) {
        let rt = runtime();
        rt.block_on(async {
            let mut c = shoal_mgmd::MgmClient::connect(&self.mgmd_addr)
                .await
                .unwrap();
            let status = c.show().await.unwrap();
            let node = status
                .nodes
                .iter()
                .find(|n| n.kind == "datanode")
                .expect("a data node");
            (format!("127.0.0.1:{}", node.port), status.cluster_id)
        })
    }

    /// The first data node's last reported status.
    pub fn datanode_status(&self) -> shoal_mgmd::NodeStatus {
        self.statuses().swap_remove(0).1
    }

    /// Polls the data node's status (reported to mgmd about once a second)
    /// until `ready` holds or 10 s pass; returns the last status either way.
    pub fn wait_for_status(
        &self,
        ready: impl Fn(&shoal_mgmd::NodeStatus) -> bool,
    ) -> shoal_mgmd::NodeStatus {
        self.wait_for_all(|id, s| id != 1 || ready(s))
            .swap_remove(0)
            .1
    }

    /// Panics (with the logs) unless every process is still running.
    pub fn assert_alive(&mut self) {
        if let Some(s) = self.mgmd.as_mut().unwrap().try_wait().unwrap() {
            panic!("mgmd died: {s}\n{}", self.logs());
        }
        for n in self.datanodes.iter_mut().flatten() {
            if let Some(s) = n.try_wait().unwrap() {
                panic!("data node died: {s}\n{}", self.logs());
            }
        }
    }

    /// `shoal verify`: every replica of every fragment identical, row by
    /// row (panics with the logs otherwise).
    pub fn verify_replicas(&self) {
        let out = self.shoal(&["verify", "--connect", &self.mgmd_addr]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("every replica identical"),
            "{stdout}\n{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for child in self
            .datanodes
            .iter_mut()
            .flatten()
            .chain(self.mgmd.as_mut())
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn spawn(args: &[&str], log: &Path) -> Child {
    // Appended to: a restarted node's log keeps its earlier lives.
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    Command::new(SHOAL)
        .args(args)
        .env("SHOAL_LOG", "info")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("spawn shoal")
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A file scripts/test.sh provides and names in environment variable
/// `var` (a client library, an interpreter), which must exist: a test
/// that needs it fails with `how` (what the script does to make it)
/// rather than skips. A relative path is taken from the workspace root,
/// where the variable is usually set (cargo runs tests in the crate's
/// directory).
pub fn provided_by_test_script(var: &str, how: &str) -> PathBuf {
    let Some(path) = std::env::var_os(var) else {
        panic!("{var} is not set: run the tests with scripts/test.sh, which {how} and sets it");
    };
    let path = PathBuf::from(path);
    let path = if path.is_relative() {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(path)
    } else {
        path
    };
    assert!(
        path.is_file(),
        "{var}={} does not exist: scripts/test.sh {how}",
        path.display()
    );
    path
}
