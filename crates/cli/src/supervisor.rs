//! The angel of `shoal up` (NDB's angel process): keeps mgmd and the data
//! nodes running as child processes, restarting whichever exits.
//!
//! Invariants:
//! - A data node that exits is started again after a backoff ([`Backoff`]),
//!   unless mgmd says the operator wants it stopped (`wanted_running`);
//!   it is started again when it becomes wanted. mgmd is always restarted
//!   (its state is on disk).
//! - The decision to restart a data node uses what mgmd said *after* the
//!   node exited: `N stop` marks the node unwanted before it tells the node
//!   to stop, so a supervisor that waited for a fresh answer never starts a
//!   node the operator just stopped. With mgmd unreachable, the last known
//!   answer holds (every node is wanted before mgmd ever answered).
//! - The supervisor registers with mgmd as an API node and declares the
//!   data nodes it supervises (`Supervise`), again after every reconnect.
//! - `<data_dir>/<name>.pid` holds the pid of the running process: written
//!   at every start, removed once the process is reaped and at shutdown,
//!   so it never names a process that is gone for longer than one tick.
//! - Everything runs on the thread that called [`Supervisor::run`]: the
//!   children's `PR_SET_PDEATHSIG` fires when the thread that forked them
//!   ends, so no other thread may spawn them.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use shoal_mgmd::{ApiSession, MgmClient, NodeInfo, NodeState};
use tokio::sync::watch;

/// The first restart's delay.
pub const BACKOFF_FIRST: Duration = Duration::from_millis(500);
/// The longest delay between restarts.
pub const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// A process that dies sooner than this after its start doubles the delay.
pub const BACKOFF_QUICK_DEATH: Duration = Duration::from_secs(30);
/// A process that stayed up this long starts over at [`BACKOFF_FIRST`].
pub const BACKOFF_RESET_AFTER: Duration = Duration::from_secs(60);
/// How often children are reaped and decisions taken.
const TICK: Duration = Duration::from_millis(100);
/// How often the wanted states are asked from mgmd.
const POLL_EVERY: Duration = Duration::from_millis(300);
/// How long one exchange with mgmd may take before the link counts as lost.
const MGMD_ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long children get to stop after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The delay before a restart: 0.5 s, doubling up to 10 s while the
/// process keeps dying within 30 s of its start; back to 0.5 s once it
/// stayed up 60 s. A crash loop thus costs little CPU, and a node that
/// failed once after running fine comes back at once. A clean exit (code
/// 0: the node was asked to stop, e.g. by `N restart`) is no crash: it
/// gets the first delay and does not make the next one longer, so a
/// rolling restart never waits for a backoff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            next: BACKOFF_FIRST,
        }
    }
}

impl Backoff {
    /// The delay before restarting a process that ran for `uptime`.
    pub fn on_exit(&mut self, uptime: Duration, clean: bool) -> Duration {
        if clean {
            return BACKOFF_FIRST;
        }
        if uptime >= BACKOFF_RESET_AFTER {
            self.next = BACKOFF_FIRST;
        }
        let delay = self.next;
        if uptime < BACKOFF_QUICK_DEATH {
            self.next = (self.next * 2).min(BACKOFF_MAX);
        }
        delay
    }
}

/// One program to keep running.
pub struct Program {
    /// "mgmd" or "datanode-N": names the log, the pid file and messages.
    pub name: String,
    /// `Some(id)` for a data node.
    pub data_node: Option<u16>,
    pub exe: PathBuf,
    pub args: Vec<String>,
    /// Added to `args` on the first start only (`--initial`: a restart
    /// after a crash must keep the files).
    pub first_args: Vec<String>,
}

/// A supervised program and its process.
struct Supervised {
    program: Program,
    child: Option<Child>,
    started_at: Instant,
    /// How often it was started; restart #n is start n + 1.
    starts: u32,
    backoff: Backoff,
    /// When it exited (the restart decision needs mgmd's view after this).
    exited_at: Option<Instant>,
    /// When its restart is due.
    restart_at: Option<Instant>,
    /// Kept down because mgmd wants it stopped (announced once).
    held_down: bool,
    /// How it last exited, for messages and the log file.
    last_exit: String,
    /// The backoff delay chosen at its last exit.
    delay: Duration,
    /// Whether the decision about its last exit was printed.
    exit_reported: bool,
}

/// What the supervisor last heard from mgmd.
#[derive(Clone, Debug)]
struct MgmView {
    /// Whether the link to mgmd is up (else `nodes` is its last answer).
    connected: bool,
    /// When the request that got this answer was sent.
    asked_at: Instant,
    nodes: Vec<NodeInfo>,
}

/// Set by the SIGINT/SIGTERM handler of `shoal up`.
pub static STOP: AtomicBool = AtomicBool::new(false);

pub struct Supervisor {
    children: Vec<Supervised>,
    data_dir: PathBuf,
    mgmd_addr: String,
}

impl Supervisor {
    /// `programs[0]` must be mgmd; the others data nodes and SQL nodes
    /// (restarted whenever they exit, like mgmd).
    pub fn new(programs: Vec<Program>, data_dir: &Path, mgmd_addr: &str) -> Supervisor {
        assert!(programs.first().is_some_and(|p| p.data_node.is_none()));
        let now = Instant::now();
        Supervisor {
            children: programs
                .into_iter()
                .map(|program| Supervised {
                    program,
                    child: None,
                    started_at: now,
                    starts: 0,
                    backoff: Backoff::default(),
                    exited_at: None,
                    restart_at: None,
                    held_down: false,
                    last_exit: String::new(),
                    delay: Duration::ZERO,
                    exit_reported: false,
                })
                .collect(),
            data_dir: data_dir.to_path_buf(),
            mgmd_addr: mgmd_addr.to_string(),
        }
    }

    fn log_path(&self, name: &str) -> PathBuf {
        self.data_dir.join(format!("{name}.log"))
    }

    fn pid_path(&self, name: &str) -> PathBuf {
        self.data_dir.join(format!("{name}.pid"))
    }

    /// Starts child `i` and writes its pid file.
    fn start(&mut self, i: usize) -> Result<(), String> {
        let s = &self.children[i];
        let log = self.log_path(&s.program.name);
        let pid_path = self.pid_path(&s.program.name);
        let restart_note = (s.starts > 0).then(|| {
            format!(
                "--- shoal up: restart #{} of {} after it exited ({})",
                s.starts, s.program.name, s.last_exit
            )
        });
        let mut args = s.program.args.clone();
        if s.starts == 0 {
            args.extend(s.program.first_args.iter().cloned());
        }
        let child = spawn(&s.program.exe, &args, &log, restart_note)?;
        write_pid_file(&pid_path, child.id())?;
        let s = &mut self.children[i];
        s.child = Some(child);
        s.started_at = Instant::now();
        s.starts += 1;
        s.exited_at = None;
        s.restart_at = None;
        s.held_down = false;
        Ok(())
    }

    /// Starts mgmd and waits until it accepts connections (an mgmd that
    /// exits first is reported with its log's last lines), then starts the
    /// data nodes.
    pub async fn start_all(&mut self) -> Result<(), String> {
        self.start(0)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(&self.mgmd_addr)
            .await
            .is_err()
        {
            if let Some(status) = self.children[0]
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                let log = self.log_path("mgmd");
                return Err(format!(
                    "mgmd exited ({}) before it listened on {}; {}:\n{}",
                    describe_exit(status),
                    self.mgmd_addr,
                    log.display(),
                    log_tail(&log, 10)
                ));
            }
            if Instant::now() > deadline || STOP.load(Ordering::SeqCst) {
                return Err(format!(
                    "mgmd did not listen on {} within 20 s; see {}",
                    self.mgmd_addr,
                    self.log_path("mgmd").display()
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for i in 1..self.children.len() {
            self.start(i)?;
        }
        Ok(())
    }

    /// Supervises until SIGINT/SIGTERM, then stops everything. `on_up` is
    /// called once, when mgmd first shows every data node started; if that
    /// does not happen within `start_timeout`, everything is stopped and
    /// the error lists the nodes that did not start.
    pub async fn run(
        &mut self,
        start_timeout: Duration,
        on_up: impl FnOnce(),
    ) -> Result<(), String> {
        let nodes: Vec<u16> = self
            .children
            .iter()
            .filter_map(|s| s.program.data_node)
            .collect();
        let (view_tx, view_rx) = watch::channel::<Option<MgmView>>(None);
        let link = tokio::spawn(mgmd_link(self.mgmd_addr.clone(), nodes, view_tx));
        let deadline = Instant::now() + start_timeout;
        let mut on_up = Some(on_up);
        let result = loop {
            if STOP.load(Ordering::SeqCst) {
                println!("stopping...");
                break Ok(());
            }
            let view = view_rx.borrow().clone();
            if on_up.is_some() {
                match not_started(view.as_ref()) {
                    None => (on_up.take().expect("checked"))(),
                    Some(waiting) if Instant::now() > deadline => {
                        break Err(format!(
                            "the cluster did not start within {} s ({waiting}); see the logs in {}",
                            start_timeout.as_secs(),
                            self.data_dir.display()
                        ))
                    }
                    Some(_) => {}
                }
            }
            if let Err(e) = self.tick(view.as_ref()) {
                break Err(e);
            }
            tokio::time::sleep(TICK).await;
        };
        link.abort();
        self.stop_all();
        result
    }

    /// Reaps exited children, decides about their restarts (announcing
    /// each decision once) and starts those due.
    fn tick(&mut self, view: Option<&MgmView>) -> Result<(), String> {
        let now = Instant::now();
        for s in &mut self.children {
            let exited = match s.child.as_mut().map(|c| c.try_wait()) {
                Some(Ok(Some(status))) => status,
                Some(Err(e)) => return Err(format!("cannot watch a child process: {e}")),
                _ => continue,
            };
            s.child = None;
            let _ = std::fs::remove_file(self.data_dir.join(format!("{}.pid", s.program.name)));
            let uptime = now.saturating_duration_since(s.started_at);
            s.delay = s.backoff.on_exit(uptime, exited.success());
            s.exited_at = Some(now);
            s.restart_at = Some(now + s.delay);
            s.last_exit = describe_exit(exited);
            s.exit_reported = false;
        }
        for i in 0..self.children.len() {
            let s = &self.children[i];
            if s.child.is_some() || s.restart_at.is_none() {
                continue;
            }
            let wanted = match s.program.data_node {
                None => true,
                Some(node_id) => match wanted(view, node_id, s.exited_at) {
                    // mgmd has not answered since the node exited; its
                    // answer from before may predate an `N stop`.
                    None => continue,
                    Some(w) => w,
                },
            };
            let name = &s.program.name;
            if !wanted {
                if !s.held_down {
                    let id = s.program.data_node.expect("only data nodes are unwanted");
                    let hint = format!(
                        "mgmd wants it stopped (`shoal mgm -c {} -e \"{id} start\"` starts it)",
                        self.mgmd_addr
                    );
                    if s.exit_reported {
                        println!("{name}: not restarting: {hint}");
                    } else {
                        println!("{name} exited ({}); not restarting: {hint}", s.last_exit);
                    }
                    let s = &mut self.children[i];
                    s.held_down = true;
                    s.exit_reported = true;
                }
                continue;
            }
            if !s.exit_reported {
                println!(
                    "{name} exited ({}); restarting in {:.1} s (restart #{})",
                    s.last_exit,
                    s.delay.as_secs_f64(),
                    s.starts
                );
            } else if s.held_down {
                println!("{name}: wanted again; starting it");
            }
            let due = s.restart_at.is_some_and(|t| now >= t);
            let s = &mut self.children[i];
            s.exit_reported = true;
            s.held_down = false;
            if due {
                self.start(i)?;
            }
        }
        Ok(())
    }

    /// SIGTERM to every child (data nodes and mgmd at once), then SIGKILL
    /// whatever has not exited after 5 s; removes the pid files.
    pub fn stop_all(&mut self) {
        for s in self.children.iter().rev() {
            if let Some(child) = &s.child {
                // SAFETY: plain kill(2) on our own, not yet reaped child.
                unsafe {
                    libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
                }
            }
        }
        let deadline = Instant::now() + STOP_GRACE;
        for s in self.children.iter_mut().rev() {
            if let Some(child) = s.child.as_mut() {
                loop {
                    match child.try_wait() {
                        Ok(Some(_)) => break,
                        Ok(None) if Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(20))
                        }
                        _ => {
                            eprintln!("{} did not stop in time; killing it", s.program.name);
                            let _ = child.kill();
                            let _ = child.wait();
                            break;
                        }
                    }
                }
            }
            s.child = None;
            let _ = std::fs::remove_file(self.data_dir.join(format!("{}.pid", s.program.name)));
        }
    }
}

/// Whether data node `node_id` should run, as far as mgmd said after
/// `exited_at`. `None` = wait for a newer answer. Without a link to mgmd
/// the last answer stands (wanted, if mgmd never answered).
fn wanted(view: Option<&MgmView>, node_id: u16, exited_at: Option<Instant>) -> Option<bool> {
    let Some(view) = view else {
        return Some(true);
    };
    if view.connected && exited_at.is_some_and(|t| view.asked_at < t) {
        return None;
    }
    Some(
        view.nodes
            .iter()
            .find(|n| n.node_id == node_id)
            .is_none_or(|n| n.wanted_running),
    )
}

/// `None` when mgmd shows every data node started; else what is missing.
fn not_started(view: Option<&MgmView>) -> Option<String> {
    let Some(view) = view else {
        return Some("mgmd did not answer".into());
    };
    let waiting: Vec<String> = view
        .nodes
        .iter()
        .filter(|n| n.kind == "datanode" && n.state != NodeState::Started)
        .map(|n| format!("node {} {}", n.node_id, n.state.as_str()))
        .collect();
    (!waiting.is_empty()).then(|| waiting.join(", "))
}

/// Keeps an API session with mgmd that supervises `nodes`, and publishes
/// mgmd's view of the nodes every [`POLL_EVERY`]; `None` while mgmd is
/// unreachable. Reconnects (and declares the supervision again) forever.
async fn mgmd_link(addr: String, nodes: Vec<u16>, view: watch::Sender<Option<MgmView>>) {
    let mut lost = false;
    loop {
        let session = tokio::time::timeout(MGMD_ANSWER_TIMEOUT, async {
            let mut s: ApiSession = MgmClient::connect(&addr).await?.register_api().await?;
            s.supervise(nodes.clone()).await?;
            Ok::<_, shoal_types::ShoalError>(s)
        })
        .await;
        let mut session = match session {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::debug!("supervisor cannot register with mgmd: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Err(_) => continue,
        };
        if lost {
            println!(
                "reconnected to mgmd at {addr}; supervising data node(s) {nodes:?} again (API node {})",
                session.node_id()
            );
        }
        loop {
            let asked_at = Instant::now();
            match tokio::time::timeout(MGMD_ANSWER_TIMEOUT, session.show()).await {
                Ok(Ok(status)) => {
                    let _ = view.send(Some(MgmView {
                        connected: true,
                        asked_at,
                        nodes: status.nodes,
                    }));
                }
                Ok(Err(e)) => {
                    tracing::debug!("supervisor lost mgmd: {e}");
                    break;
                }
                Err(_) => {
                    tracing::debug!("mgmd did not answer within {MGMD_ANSWER_TIMEOUT:?}");
                    break;
                }
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
        // Keep the last answer: with mgmd gone it is the best knowledge of
        // the operator's intent (see `wanted`).
        view.send_modify(|v| {
            if let Some(v) = v {
                v.connected = false;
            }
        });
        lost = true;
    }
}

/// "exit code 1" or "killed by signal 9".
fn describe_exit(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}

/// The last `lines` lines of a log file, for error messages.
fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Writes a pid file atomically (a reader never sees half a number).
fn write_pid_file(path: &Path, pid: u32) -> Result<(), String> {
    let tmp = path.with_extension("pid.tmp");
    std::fs::write(&tmp, format!("{pid}\n"))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Starts a child in its own process group (a terminal's Ctrl-C reaches
/// only `shoal up`, which stops the children in order) that gets SIGTERM
/// when this thread ends. Its output goes to `log`: truncated at the first
/// start, appended to at restarts (after `restart_note`) so the previous
/// life's last words stay.
fn spawn(
    exe: &Path,
    args: &[String],
    log: &Path,
    restart_note: Option<String>,
) -> Result<Child, String> {
    use std::io::Write;
    let first = restart_note.is_none();
    let mut log_file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(!first)
        .truncate(first)
        .open(log)
        .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    if let Some(note) = restart_note {
        let _ = writeln!(log_file, "{note}");
    }
    let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .stdout(log_file)
        .stderr(log_err);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: prctl, getppid, setpgid and _exit are async-signal-safe;
    // nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            // The parent may have died before prctl: then no signal comes.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            libc::setpgid(0, 0);
            Ok(())
        });
    }
    cmd.spawn()
        .map_err(|e| format!("cannot start {} {}: {e}", exe.display(), args.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_while_dying_young_and_resets_after_a_minute() {
        let mut b = Backoff::default();
        let quick = Duration::from_secs(1);
        let delays: Vec<f64> = (0..7)
            .map(|_| b.on_exit(quick, false).as_secs_f64())
            .collect();
        assert_eq!(delays, vec![0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]);
        // Between 30 and 60 s up: the delay holds.
        assert_eq!(b.on_exit(Duration::from_secs(45), false), BACKOFF_MAX);
        assert_eq!(b.on_exit(Duration::from_secs(45), false), BACKOFF_MAX);
        // A clean exit (asked to stop) neither waits long nor counts.
        assert_eq!(b.on_exit(quick, true), BACKOFF_FIRST);
        assert_eq!(b.on_exit(Duration::from_secs(45), false), BACKOFF_MAX);
        // A minute up: back to the first delay, and doubling from there.
        assert_eq!(b.on_exit(Duration::from_secs(60), false), BACKOFF_FIRST);
        assert_eq!(b.on_exit(quick, false), BACKOFF_FIRST);
        assert_eq!(b.on_exit(quick, true), BACKOFF_FIRST);
        assert_eq!(b.on_exit(quick, false), Duration::from_secs(1));
    }

    fn view(asked_at: Instant, wanted_running: bool) -> MgmView {
        MgmView {
            connected: true,
            asked_at,
            nodes: vec![NodeInfo {
                node_id: 2,
                kind: "datanode".into(),
                host: "127.0.0.1".into(),
                port: 0,
                state: NodeState::NotStarted,
                status: None,
                primaries: 0,
                node_group: None,
                incarnation: 1,
                wanted_running,
                supervised: true,
            }],
        }
    }

    #[test]
    fn restart_decisions_wait_for_mgmd_to_speak_after_the_exit() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(1);
        assert_eq!(wanted(None, 2, Some(t0)), Some(true), "no mgmd: run it");
        assert_eq!(wanted(Some(&view(t0, false)), 2, Some(later)), None);
        assert_eq!(wanted(Some(&view(later, false)), 2, Some(t0)), Some(false));
        assert_eq!(wanted(Some(&view(later, true)), 2, Some(t0)), Some(true));
        assert_eq!(wanted(Some(&view(t0, true)), 2, None), Some(true));
        // mgmd unreachable: its last answer stands.
        let mut lost = view(t0, false);
        lost.connected = false;
        assert_eq!(wanted(Some(&lost), 2, Some(later)), Some(false));
        assert_eq!(
            not_started(Some(&view(t0, true))).unwrap(),
            "node 2 not started"
        );
    }

    #[test]
    fn exits_are_described_in_words() {
        assert_eq!(describe_exit(ExitStatus::from_raw(9)), "killed by signal 9");
        assert_eq!(describe_exit(ExitStatus::from_raw(1 << 8)), "exit code 1");
    }
}
