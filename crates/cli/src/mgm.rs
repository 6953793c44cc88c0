//! `shoal mgm`: the admin client (NDB's `ndb_mgm`). `show`, `wait`, and
//! the node commands `N start|stop|restart` and `all start|stop|restart`
//! (a rolling restart), given with `-e "..."`, case-insensitive.
//!
//! Node commands wait for their outcome as mgmd shows it (a stopped node
//! not started, a started node started, a restarted node started with a
//! new incarnation), for at most `--timeout-secs` per node, and fail with
//! exit code 1 and a message saying which node did not get there.

use std::time::{Duration, Instant};

use shoal_mgmd::{ApiSession, ClusterStatus, MgmClient, NodeInfo, NodeState};

/// How long `-e wait` waits by default.
const WAIT_TIMEOUT_SECS_DEFAULT: u64 = 120;
/// How long a node command waits for each node by default.
const NODE_TIMEOUT_SECS_DEFAULT: u64 = 300;
/// How often mgmd is asked while waiting.
const POLL_EVERY: Duration = Duration::from_millis(200);
const VALID_COMMANDS: &str = "show, wait, N start, N stop, N restart, all start, all stop, \
                              all restart (N = a data node id)";

#[derive(clap::Args)]
pub struct MgmArgs {
    /// mgmd address.
    #[arg(long, short = 'c', default_value = "127.0.0.1:1186")]
    connect: String,
    /// Run one command and exit: show, wait, "N start", "N stop",
    /// "N restart", "all start", "all stop", "all restart" (rolling).
    #[arg(short = 'e', long = "execute")]
    execute: Option<String>,
    /// How long -e commands wait: for each node of a node command (default
    /// 300), for the whole cluster with `wait` (default 120).
    #[arg(long)]
    timeout_secs: Option<u64>,
    #[command(subcommand)]
    command: Option<MgmCommand>,
}

#[derive(clap::Subcommand)]
enum MgmCommand {
    /// Print nodes, states and memory.
    Show,
    /// Block until every data node is started (exit 0), or time out (exit 1).
    Wait {
        #[arg(long, default_value_t = WAIT_TIMEOUT_SECS_DEFAULT)]
        timeout_secs: u64,
    },
}

/// A parsed `-e` command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Execute {
    Show,
    Wait,
    Node(Target, Action),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    One(u16),
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Start,
    Stop,
    Restart,
}

fn parse_execute(text: &str) -> Result<Execute, String> {
    let lower = text.trim().to_ascii_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let unknown = || format!("unknown command {text:?}; valid commands: {VALID_COMMANDS}");
    match words.as_slice() {
        ["show"] => Ok(Execute::Show),
        ["wait"] => Ok(Execute::Wait),
        [target, action] => {
            let action = match *action {
                "start" => Action::Start,
                "stop" => Action::Stop,
                "restart" => Action::Restart,
                _ => return Err(unknown()),
            };
            let target = match *target {
                "all" => Target::All,
                id => match id.parse::<u16>() {
                    Ok(n) if (1..=shoal_mgmd::config::NODE_ID_MAX).contains(&n) => Target::One(n),
                    Ok(_) | Err(_) if id.bytes().all(|b| b.is_ascii_digit()) => {
                        return Err(format!(
                            "node id {id} is out of range 1..={}",
                            shoal_mgmd::config::NODE_ID_MAX
                        ))
                    }
                    _ => return Err(unknown()),
                },
            };
            Ok(Execute::Node(target, action))
        }
        _ => Err(unknown()),
    }
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

pub fn run(args: MgmArgs) -> Result<(), String> {
    let execute = match (&args.execute, args.command) {
        (Some(e), None) => parse_execute(e)?,
        (None, Some(MgmCommand::Show)) | (None, None) => Execute::Show,
        (None, Some(MgmCommand::Wait { timeout_secs })) => {
            return wait(&args.connect, timeout_secs);
        }
        (Some(_), Some(_)) => return Err("give either -e COMMAND or a subcommand, not both".into()),
    };
    match execute {
        Execute::Show => tokio_runtime().block_on(async {
            let mut client = MgmClient::connect(&args.connect)
                .await
                .map_err(|e| e.to_string())?;
            let status = client.show().await.map_err(|e| e.to_string())?;
            print!("{}", shoal_mgmd::client::format_show(&status));
            Ok(())
        }),
        Execute::Wait => wait(
            &args.connect,
            args.timeout_secs.unwrap_or(WAIT_TIMEOUT_SECS_DEFAULT),
        ),
        Execute::Node(target, action) => {
            let timeout =
                Duration::from_secs(args.timeout_secs.unwrap_or(NODE_TIMEOUT_SECS_DEFAULT));
            tokio_runtime().block_on(async {
                let session = MgmClient::connect(&args.connect)
                    .await
                    .map_err(|e| e.to_string())?
                    .register_api()
                    .await
                    .map_err(|e| e.to_string())?;
                let mut admin = Admin { session, timeout };
                match (target, action) {
                    (Target::One(n), Action::Stop) => admin.stop(n).await,
                    (Target::One(n), Action::Start) => admin.start(n).await,
                    (Target::One(n), Action::Restart) => admin.restart(n).await,
                    (Target::All, Action::Stop) => admin.stop_all().await,
                    (Target::All, Action::Start) => admin.start_all().await,
                    (Target::All, Action::Restart) => admin.rolling_restart().await,
                }
            })
        }
    }
}

fn wait(connect: &str, timeout_secs: u64) -> Result<(), String> {
    tokio_runtime().block_on(async {
        let status = shoal_mgmd::client::wait_started(connect, Duration::from_secs(timeout_secs))
            .await
            .map_err(|e| e.to_string())?;
        let n = data_nodes(&status).len();
        println!("all {n} data node(s) started");
        Ok(())
    })
}

fn data_nodes(status: &ClusterStatus) -> Vec<&NodeInfo> {
    let mut nodes: Vec<&NodeInfo> = status
        .nodes
        .iter()
        .filter(|n| n.kind == shoal_mgmd::config::KIND_DATANODE)
        .collect();
    nodes.sort_by_key(|n| n.node_id);
    nodes
}

/// The waves of a rolling restart: the first node (by id) of each node
/// group, then the second of each, and so on. A node without a known
/// group is a wave of its own.
fn restart_waves(nodes: &[&NodeInfo]) -> Vec<Vec<u16>> {
    let mut groups: std::collections::BTreeMap<Option<u16>, Vec<u16>> = Default::default();
    let mut alone = Vec::new();
    for n in nodes {
        match n.node_group {
            Some(g) => groups.entry(Some(g)).or_default().push(n.node_id),
            None => alone.push(vec![n.node_id]),
        }
    }
    let depth = groups.values().map(Vec::len).max().unwrap_or(0);
    let mut waves: Vec<Vec<u16>> = (0..depth)
        .map(|i| groups.values().filter_map(|g| g.get(i).copied()).collect())
        .collect();
    waves.extend(alone);
    waves
}

fn node(status: &ClusterStatus, node_id: u16) -> Option<&NodeInfo> {
    data_nodes(status)
        .into_iter()
        .find(|n| n.node_id == node_id)
}

fn all_started(status: &ClusterStatus) -> bool {
    data_nodes(status)
        .iter()
        .all(|n| n.state == NodeState::Started)
}

/// The states of the data nodes, for timeout messages.
fn states(status: &ClusterStatus) -> String {
    data_nodes(status)
        .iter()
        .map(|n| format!("node {} {}", n.node_id, n.state.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An API session running node commands.
struct Admin {
    session: ApiSession,
    /// Per node: how long to wait for it to get where it was sent.
    timeout: Duration,
}

impl Admin {
    async fn show(&mut self) -> Result<ClusterStatus, String> {
        self.session.show().await.map_err(|e| e.to_string())
    }

    /// The data node's entry, or an error naming the configured ones.
    async fn node(&mut self, node_id: u16) -> Result<NodeInfo, String> {
        let status = self.show().await?;
        node(&status, node_id).cloned().ok_or_else(|| {
            let ids: Vec<String> = data_nodes(&status)
                .iter()
                .map(|n| n.node_id.to_string())
                .collect();
            format!(
                "node {node_id} is not a data node of this cluster; data node ids: {}",
                ids.join(", ")
            )
        })
    }

    /// Polls mgmd until `done` holds; the error says what was awaited and
    /// what mgmd showed last.
    async fn wait_until(
        &mut self,
        what: &str,
        done: impl Fn(&ClusterStatus) -> bool,
    ) -> Result<ClusterStatus, String> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let status = self.show().await?;
            if done(&status) {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "timed out after {} s waiting until {what} ({}); see the data node logs, \
                     or raise --timeout-secs",
                    self.timeout.as_secs(),
                    states(&status)
                ));
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    async fn stop(&mut self, node_id: u16) -> Result<(), String> {
        let before = self.node(node_id).await?;
        let supervised = before.supervised;
        self.session
            .stop_node(node_id)
            .await
            .map_err(|e| e.to_string())?;
        if before.state == NodeState::NotStarted {
            // Marked unwanted all the same, so a supervisor keeps it down.
            if supervised {
                println!("Node {node_id} is not running; it stays down until `{node_id} start`.");
            } else {
                println!("Node {node_id} is not running.");
            }
            return Ok(());
        }
        println!("Node {node_id}: stopping");
        self.wait_until(&format!("node {node_id} has stopped"), |s| {
            node(s, node_id).is_some_and(|n| n.state == NodeState::NotStarted)
        })
        .await?;
        if supervised {
            println!("Node {node_id} has shut down; it stays down until `{node_id} start`.");
        } else {
            println!("Node {node_id} has shut down.");
        }
        Ok(())
    }

    async fn start(&mut self, node_id: u16) -> Result<(), String> {
        let before = self.node(node_id).await?;
        // Without a supervisor mgmd answers with how to start it by hand.
        self.session
            .start_node(node_id)
            .await
            .map_err(|e| e.to_string())?;
        if before.state == NodeState::Started {
            println!("Node {node_id} is already started.");
            return Ok(());
        }
        println!("Node {node_id} is being started");
        let status = self
            .wait_until(&format!("node {node_id} is started"), |s| {
                node(s, node_id).is_some_and(|n| n.state == NodeState::Started)
            })
            .await?;
        let incarnation = node(&status, node_id).map_or(0, |n| n.incarnation);
        println!("Node {node_id} is started (start #{incarnation}).");
        Ok(())
    }

    /// Restarts one node and waits until it is back with a new incarnation
    /// and every data node is started.
    async fn restart(&mut self, node_id: u16) -> Result<(), String> {
        self.restart_together(&[node_id]).await
    }

    /// Restarts `ids` at once and waits until each is back in a new start
    /// and every data node is started.
    async fn restart_together(&mut self, ids: &[u16]) -> Result<(), String> {
        let began = Instant::now();
        let mut before = Vec::new();
        for &id in ids {
            before.push((id, self.node(id).await?.incarnation));
        }
        for &id in ids {
            self.session
                .restart_node(id)
                .await
                .map_err(|e| format!("node {id}: {e}"))?;
            println!("Node {id}: restarting");
        }
        let which = ids
            .iter()
            .map(|id| id.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        // Down, or already back in a new life (a fast restart may never be
        // seen down).
        self.wait_until(&format!("node(s) {which} have stopped"), |s| {
            before.iter().all(|&(id, inc)| {
                node(s, id).is_some_and(|n| n.state != NodeState::Started || n.incarnation > inc)
            })
        })
        .await?;
        println!("Node(s) {which}: stopped; waiting for the supervisor to start them");
        let status = self
            .wait_until(
                &format!("node(s) {which} are started again and every data node is started"),
                |s| {
                    before
                        .iter()
                        .all(|&(id, inc)| node(s, id).is_some_and(|n| n.incarnation > inc))
                        && all_started(s)
                },
            )
            .await?;
        for &id in ids {
            let incarnation = node(&status, id).map_or(0, |n| n.incarnation);
            println!("Node {id}: started again (start #{incarnation})");
        }
        println!(
            "All data nodes started ({:.1} s)",
            began.elapsed().as_secs_f64()
        );
        Ok(())
    }

    async fn stop_all(&mut self) -> Result<(), String> {
        let status = self.show().await?;
        let ids: Vec<u16> = data_nodes(&status).iter().map(|n| n.node_id).collect();
        for &id in &ids {
            println!("Node {id}: stopping");
            self.session
                .stop_node(id)
                .await
                .map_err(|e| e.to_string())?;
        }
        self.wait_until("every data node has stopped", |s| {
            data_nodes(s)
                .iter()
                .all(|n| n.state == NodeState::NotStarted)
        })
        .await?;
        println!("All {} data node(s) have shut down.", ids.len());
        Ok(())
    }

    async fn start_all(&mut self) -> Result<(), String> {
        let status = self.show().await?;
        let ids: Vec<u16> = data_nodes(&status).iter().map(|n| n.node_id).collect();
        // Every node is marked wanted even if one of them cannot be started.
        let mut by_hand = Vec::new();
        for &id in &ids {
            if let Err(e) = self.session.start_node(id).await {
                by_hand.push(format!("node {id}: {}", e.detail));
            }
        }
        if !by_hand.is_empty() {
            return Err(by_hand.join("\n"));
        }
        println!("Data nodes {ids:?} are being started");
        self.wait_until("every data node is started", all_started)
            .await?;
        println!("All {} data node(s) are started.", ids.len());
        Ok(())
    }

    /// Restarts the data nodes in waves of one node per node group (the
    /// first node of each group, then the second, ...), each wave only
    /// after the previous one is back and every data node is started, so
    /// every node group keeps a live replica throughout (NDB's rolling
    /// restart).
    async fn rolling_restart(&mut self) -> Result<(), String> {
        let began = Instant::now();
        let status = self.show().await?;
        let nodes = data_nodes(&status);
        // Checked before anything stops: half a rolling restart that cannot
        // go on is worse than none.
        let unsupervised: Vec<String> = nodes
            .iter()
            .filter(|n| !n.supervised)
            .map(|n| n.node_id.to_string())
            .collect();
        if !unsupervised.is_empty() {
            return Err(format!(
                "data node(s) {} have no supervisor (shoal up), so a stopped node would not \
                 come back; nothing was restarted",
                unsupervised.join(", ")
            ));
        }
        if !all_started(&status) {
            return Err(format!(
                "a rolling restart needs every data node started ({}), or a node group could \
                 lose its last replica; nothing was restarted",
                states(&status)
            ));
        }
        let waves = restart_waves(&nodes);
        let count: usize = waves.iter().map(Vec::len).sum();
        for (i, wave) in waves.iter().enumerate() {
            println!(
                "[{}/{}] restarting node(s) {wave:?} (one per node group)",
                i + 1,
                waves.len()
            );
            self.restart_together(wave).await.map_err(|e| {
                let left: Vec<String> = waves[i + 1..]
                    .iter()
                    .flatten()
                    .map(|n| n.to_string())
                    .collect();
                if left.is_empty() {
                    format!("rolling restart failed at node(s) {wave:?}: {e}")
                } else {
                    format!(
                        "rolling restart failed at node(s) {wave:?}: {e}; node(s) {} were not restarted",
                        left.join(", ")
                    )
                }
            })?;
        }
        println!(
            "Rolling restart done: {count} data node(s) restarted in {:.1} s.",
            began.elapsed().as_secs_f64()
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolling_restart_waves_take_one_node_per_group() {
        let info = |node_id: u16, group: Option<u16>| NodeInfo {
            node_id,
            kind: shoal_mgmd::config::KIND_DATANODE.to_string(),
            host: "127.0.0.1".into(),
            port: 0,
            state: NodeState::Started,
            status: None,
            primaries: 0,
            node_group: group,
            incarnation: 1,
            wanted_running: true,
            supervised: true,
        };
        let nodes = [
            info(1, Some(0)),
            info(2, Some(0)),
            info(3, Some(1)),
            info(4, Some(1)),
            info(5, None),
        ];
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        assert_eq!(restart_waves(&refs), vec![vec![1, 3], vec![2, 4], vec![5]]);
        let two = [info(1, Some(0)), info(2, Some(0))];
        let refs: Vec<&NodeInfo> = two.iter().collect();
        assert_eq!(restart_waves(&refs), vec![vec![1], vec![2]]);
    }

    #[test]
    fn commands_parse_case_insensitively() {
        assert_eq!(parse_execute(" SHOW ").unwrap(), Execute::Show);
        assert_eq!(parse_execute("wait").unwrap(), Execute::Wait);
        assert_eq!(
            parse_execute("2 Stop").unwrap(),
            Execute::Node(Target::One(2), Action::Stop)
        );
        assert_eq!(
            parse_execute("ALL  restart").unwrap(),
            Execute::Node(Target::All, Action::Restart)
        );
        assert_eq!(
            parse_execute("3 start").unwrap(),
            Execute::Node(Target::One(3), Action::Start)
        );
        for bad in ["", "stop", "2 halt", "x stop", "2 stop now", "all"] {
            let e = parse_execute(bad).unwrap_err();
            assert!(
                e.contains("valid commands: show, wait, N start"),
                "{bad}: {e}"
            );
        }
        for bad in ["0 stop", "256 stop", "99999 restart"] {
            let e = parse_execute(bad).unwrap_err();
            assert!(e.contains("out of range 1..=255"), "{bad}: {e}");
        }
    }
}
