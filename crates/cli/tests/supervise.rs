//! `shoal up` as a supervisor, and the node commands of `shoal mgm`, over
//! real processes on 127.0.0.1: a killed data node or mgmd comes back, a
//! stopped node stays down until started, restarts and rolling restarts
//! give nodes new incarnations, and a rolling restart under load loses
//! nothing (the restarted nodes copy their data back from the others).

mod common;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, runtime, TestCluster, SHOAL};
use shoal_mgmd::{ClusterStatus, MgmClient, NodeInfo, NodeState};

/// How long any one thing may take to happen before a test fails.
const WAIT: Duration = Duration::from_secs(30);

/// `shoal up` with 2 data nodes and 2 replicas on a free port. Dropping it
/// stops `shoal up` and kills whatever child is left (even after a panic).
struct Up {
    dir: tempfile::TempDir,
    addr: String,
    up: Option<Child>,
}

impl Up {
    fn start() -> Up {
        Up::start_with(2)
    }

    /// `shoal up` with `data_nodes` data nodes, two replicas each.
    fn start_with(data_nodes: u16) -> Up {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let out = std::fs::File::create(dir.path().join("up.out")).unwrap();
        let err = std::fs::File::create(dir.path().join("up.err")).unwrap();
        let mut up = Command::new(SHOAL);
        up.args(["up", "--data-dir"])
            .arg(dir.path())
            .args(["--mgm-port", &port.to_string()])
            .args([
                "--data-nodes",
                &data_nodes.to_string(),
                "--replicas",
                "2",
                "--data-memory",
                "64M",
            ])
            .env("SHOAL_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own process group, so a signal meant for the test runner
            // never reaches it and Drop can address it alone.
            .process_group(0);
        // SAFETY: prctl is async-signal-safe. If the test process dies
        // without running Drop (SIGKILL), shoal up gets SIGTERM and stops
        // its children.
        unsafe {
            up.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let up = up.spawn().expect("spawn shoal up");
        let mut cluster = Up {
            dir,
            addr: format!("127.0.0.1:{port}"),
            up: Some(up),
        };
        let deadline = Instant::now() + WAIT;
        while !cluster.stdout().contains("Shoal cluster is up") {
            if let Some(status) = cluster.up.as_mut().unwrap().try_wait().unwrap() {
                panic!("shoal up exited ({status})\n{}", cluster.logs());
            }
            assert!(
                Instant::now() < deadline,
                "shoal up did not come up\n{}",
                cluster.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        cluster
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn read(&self, name: &str) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(self.path(name)) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    fn stdout(&self) -> String {
        self.read("up.out")
    }

    fn logs(&self) -> String {
        [
            "up.out",
            "up.err",
            "mgmd.log",
            "datanode-1.log",
            "datanode-2.log",
            "datanode-3.log",
            "datanode-4.log",
        ]
        .iter()
        .map(|n| format!("--- {n}\n{}", self.read(n)))
        .collect::<Vec<_>>()
        .join("\n")
    }

    /// The pid in `<name>.pid`, if the file exists.
    fn pid(&self, name: &str) -> Option<i32> {
        self.read(&format!("{name}.pid")).trim().parse().ok()
    }

    /// Waits until `<name>.pid` holds a pid other than `old`.
    fn wait_new_pid(&self, name: &str, old: i32) -> i32 {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(pid) = self.pid(name).filter(|&p| p != old) {
                return pid;
            }
            assert!(
                Instant::now() < deadline,
                "{name} was not restarted\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn status(&self) -> Option<ClusterStatus> {
        runtime().block_on(async {
            let mut c = MgmClient::connect(&self.addr).await.ok()?;
            c.show().await.ok()
        })
    }

    /// Polls mgmd until `ready` holds for its status.
    fn wait_status(&self, what: &str, ready: impl Fn(&ClusterStatus) -> bool) -> ClusterStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            let status = self.status();
            if let Some(s) = status.as_ref().filter(|s| ready(s)) {
                return s.clone();
            }
            assert!(
                Instant::now() < deadline,
                "never saw {what}; last status: {status:#?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `shoal mgm -e COMMAND` against this cluster.
    fn mgm(&self, command: &str) -> Output {
        mgm(&self.addr, command)
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if let Some(mut up) = self.up.take() {
            // SIGTERM: shoal up stops its children and removes the pid files.
            unsafe {
                libc::kill(up.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while up.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = up.kill();
            let _ = up.wait();
        }
        // Whatever is left (shoal up killed before it could stop them):
        // each child leads its own process group.
        for name in ["mgmd", "datanode-1", "datanode-2"] {
            if let Some(pid) = self.pid(name).filter(|&p| is_shoal(p)) {
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// Whether `pid` is a live shoal process (not a reused pid).
fn is_shoal(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("shoal"))
        .unwrap_or(false)
}

fn mgm(addr: &str, command: &str) -> Output {
    Command::new(SHOAL)
        .args([
            "mgm",
            "--connect",
            addr,
            "--timeout-secs",
            "30",
            "-e",
            command,
        ])
        .output()
        .expect("run shoal mgm")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn data_node(s: &ClusterStatus, id: u16) -> &NodeInfo {
    s.nodes
        .iter()
        .find(|n| n.node_id == id && n.kind == "datanode")
        .expect("data node in show")
}

fn started_as(s: &ClusterStatus, id: u16, incarnation: u32) -> bool {
    let n = data_node(s, id);
    n.state == NodeState::Started && n.incarnation == incarnation
}

/// Started in a later start than `before` (mgmd numbers the starts of all
/// data nodes from one sequence, so a node's next start number is larger
/// but not always by one).
fn started_after(s: &ClusterStatus, id: u16, before: u32) -> bool {
    let n = data_node(s, id);
    n.state == NodeState::Started && n.incarnation > before
}

/// The start numbers of data nodes 1 and 2.
fn starts_of(s: &ClusterStatus) -> (u32, u32) {
    (data_node(s, 1).incarnation, data_node(s, 2).incarnation)
}

fn kill9(pid: i32) {
    assert!(is_shoal(pid), "pid {pid} is not a shoal process");
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

#[test]
fn killed_data_node_and_mgmd_are_restarted() {
    let up = Up::start();
    let status = up.wait_status("both data nodes supervised", |s| {
        [1, 2].iter().all(|&id| data_node(s, id).supervised)
    });
    let (first1, first2) = starts_of(&status);
    assert!(started_as(&status, 2, first2), "{status:#?}");

    // The data dir is this cluster's: a second `shoal up` on it (another
    // port) refuses to start instead of running a cluster over its files.
    let second = Command::new(SHOAL)
        .args(["up", "--data-dir"])
        .arg(up.dir.path())
        .args(["--mgm-port", &free_port().to_string()])
        .output()
        .expect("run a second shoal up");
    assert!(!second.status.success(), "{}", text(&second));
    assert!(
        text(&second).contains("is in use by another process (shoal up, pid"),
        "{}",
        text(&second)
    );

    let old = up.pid("datanode-2").expect("pid file of data node 2");
    kill9(old);
    let new = up.wait_new_pid("datanode-2", old);
    assert!(is_shoal(new));
    let again = up.wait_status("node 2 started again in a new start", |s| {
        started_after(s, 2, first2) && started_as(s, 1, first1)
    });
    let second2 = data_node(&again, 2).incarnation;
    assert!(
        up.stdout()
            .contains("datanode-2 exited (killed by signal 9); restarting in 0.5 s (restart #1)"),
        "{}",
        up.stdout()
    );

    // mgmd's state is on disk, so it is simply restarted; the supervisor
    // registers with the new mgmd and supervises the data nodes again.
    let old = up.pid("mgmd").expect("pid file of mgmd");
    kill9(old);
    up.wait_new_pid("mgmd", old);
    let status = up.wait_status("the supervisor back with the new mgmd", |s| {
        [1, 2].iter().all(|&id| data_node(s, id).supervised)
    });
    assert_eq!(
        data_node(&status, 2).incarnation,
        second2,
        "start numbers survive mgmd's restart"
    );
    let out = up.stdout();
    assert!(out.contains("mgmd exited (killed by signal 9)"), "{out}");
    assert!(out.contains("reconnected to mgmd"), "{out}");
    // The data node processes were not touched by mgmd's restart.
    assert_eq!(up.pid("datanode-2"), Some(new));
}

#[test]
fn stop_start_restart_and_rolling_restart() {
    let up = Up::start();
    let status = up.wait_status("both data nodes supervised", |s| {
        [1, 2].iter().all(|&id| data_node(s, id).supervised)
    });
    let (first1, first2) = starts_of(&status);

    let o = up.mgm("2 STOP");
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("Node 2 has shut down"), "{}", text(&o));
    // It stays down: give the supervisor time to get it wrong.
    std::thread::sleep(Duration::from_millis(1500));
    let status = up.status().expect("mgmd answers");
    let n2 = data_node(&status, 2);
    assert_eq!(n2.state, NodeState::NotStarted, "{n2:?}");
    assert!(!n2.wanted_running && n2.supervised, "{n2:?}");
    assert_eq!(up.pid("datanode-2"), None, "no process, no pid file");
    assert!(
        up.stdout()
            .contains("datanode-2 exited (exit code 0); not restarting: mgmd wants it stopped"),
        "{}",
        up.stdout()
    );

    let o = up.mgm("2 start");
    assert!(o.status.success(), "{}", text(&o));
    let status = up.status().expect("mgmd answers");
    let second2 = data_node(&status, 2).incarnation;
    assert!(second2 > first2, "{status:#?}");
    assert!(
        text(&o).contains(&format!("Node 2 is started (start #{second2})")),
        "{}",
        text(&o)
    );
    assert!(up.pid("datanode-2").is_some_and(is_shoal));

    let o = up.mgm("1 restart");
    assert!(o.status.success(), "{}", text(&o));
    let status = up.wait_status("node 1 in its second life", |s| {
        started_after(s, 1, first1) && started_as(s, 2, second2)
    });
    let (second1, _) = starts_of(&status);

    let o = up.mgm("all restart");
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    // One node group: one node at a time.
    assert!(out.contains("[1/2] restarting node(s) [1]"), "{out}");
    assert!(out.contains("[2/2] restarting node(s) [2]"), "{out}");
    assert!(out.contains("Rolling restart done"), "{out}");
    let status = up.status().expect("mgmd answers");
    assert!(
        started_after(&status, 1, second1) && started_after(&status, 2, second2),
        "{status:#?}"
    );

    let o = up.mgm("all stop");
    assert!(o.status.success(), "{}", text(&o));
    let status = up.wait_status("both data nodes down", |s| {
        [1, 2]
            .iter()
            .all(|&id| data_node(s, id).state == NodeState::NotStarted)
    });
    assert!(!data_node(&status, 1).wanted_running);

    let o = up.mgm("2 halt");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("valid commands"), "{}", text(&o));
}

#[test]
fn rolling_restart_under_load_loses_nothing() {
    // Two node groups of two: the restart goes in two waves of one node
    // per group.
    let up = Up::start_with(4);
    up.wait_status("every data node supervised and started", |s| {
        [1, 2, 3, 4]
            .iter()
            .all(|&id| data_node(s, id).supervised && data_node(s, id).state == NodeState::Started)
    });
    let bank = Command::new(SHOAL)
        .args(["bench", "bank", "--connect", &up.addr])
        .args([
            "--accounts",
            "300",
            "--threads",
            "4",
            "--duration-secs",
            "12",
        ])
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let o = up.mgm("all restart");
    assert!(o.status.success(), "{}\n{}", text(&o), up.logs());
    assert!(
        text(&o).contains("Rolling restart done: 4 data node(s)"),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("restarting node(s) [1, 3]"),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("restarting node(s) [2, 4]"),
        "{}",
        text(&o)
    );
    let out = bank.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bank: {stdout}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        up.logs()
    );
    // Only retried temporary errors: the bank stops at a permanent one.
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["unknown"], 0, "{report}");
    assert_eq!(report["history_verified"], true, "{report}");
    let verified = Command::new(SHOAL)
        .args(["verify", "--connect", &up.addr])
        .output()
        .unwrap();
    assert!(verified.status.success(), "{}", text(&verified));
}

/// Without `shoal up`, the commands say what to do by hand.
#[test]
fn node_commands_without_a_supervisor_explain_what_to_do() {
    let mut cluster = TestCluster::start_nodes(2, 2, |_| {});
    let addr = cluster.mgmd_addr.clone();

    for command in ["1 restart", "all restart"] {
        let o = mgm(&addr, command);
        assert_eq!(o.status.code(), Some(1), "{command}: {}", text(&o));
        assert!(
            text(&o).contains("no supervisor"),
            "{command}: {}",
            text(&o)
        );
    }

    let first1 = runtime().block_on(async {
        let s = MgmClient::connect(&addr)
            .await
            .unwrap()
            .show()
            .await
            .unwrap();
        data_node(&s, 1).incarnation
    });
    let o = mgm(&addr, "1 stop");
    assert!(o.status.success(), "{}", text(&o));
    let mut old = cluster.datanodes[0].take().expect("node 1 process");
    let exited = old.wait().expect("node 1 exits");
    assert!(
        exited.success(),
        "a requested stop is a clean exit: {exited}"
    );

    let o = mgm(&addr, "1 start");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let hint = format!("shoal datanode --connect {addr} --node-id 1");
    assert!(text(&o).contains(&hint), "{}", text(&o));

    // Doing what the message says brings it back, in its second life.
    cluster.datanodes[0] = Some(cluster.spawn_datanode(1));
    cluster.wait_started();
    let status = runtime().block_on(async {
        MgmClient::connect(&addr)
            .await
            .unwrap()
            .show()
            .await
            .unwrap()
    });
    assert!(started_after(&status, 1, first1), "{status:#?}");
    assert!(data_node(&status, 1).wanted_running);
}
