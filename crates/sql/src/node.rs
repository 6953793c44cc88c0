//! `shoal sql`: an SQL node process (NDB's mysqld as an SQL node). It is
//! one API node of the cluster (registered through mgmd like any client)
//! serving the MySQL protocol; every connection's session runs on that
//! one cluster connection. Logins are checked against the accounts mgmd
//! keeps for the whole cluster (a fresh cluster has `root` without a
//! password, from this machine only).

use crate::exec::Limits;
use crate::protocol::{serve_with_shutdown, ServerConfig};
use crate::session::SessionFactory;
use shoal_client::{Cluster, ClusterOptions, ErrorCode};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the SQL node keeps trying to reach the cluster at its start
/// (started beside mgmd by `shoal up`, it may come up first).
const CONNECT_PATIENCE: Duration = Duration::from_secs(60);

/// Where the SQL node connects and listens.
#[derive(Clone, Debug)]
pub struct SqlNodeOptions {
    /// mgmd's address.
    pub mgmd_addr: String,
    /// The address to listen on (127.0.0.1 unless asked otherwise).
    pub bind: String,
    pub port: u16,
    /// [`ClusterOptions::neighbour`] (`shoal sql --neighbour`).
    pub neighbour: Option<u16>,
    /// What one statement may hold (`shoal sql --query-memory-mb`).
    pub limits: Limits,
}

/// Runs the SQL node until `shutdown` completes: connects to the cluster
/// (retrying for a minute), listens, serves.
pub async fn run(
    opts: SqlNodeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), String> {
    let cluster = connect(&opts.mgmd_addr, opts.neighbour).await?;
    let addr = format!("{}:{}", opts.bind, opts.port);
    let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|e| {
        format!("the SQL node cannot listen on {addr} (is the port taken? pass --port): {e}")
    })?;
    eprintln!(
        "SQL node (API node {}) listening on {addr}; connect with: mariadb -h {} -P {} -u root",
        cluster.node_id(),
        opts.bind,
        opts.port
    );
    let factory = Arc::new(SessionFactory::new(cluster.clone()).with_limits(opts.limits));
    // Logins are checked against the cluster's accounts in mgmd, asked at
    // each login (`exec::users::ClusterUsers`).
    let config = ServerConfig {
        users: factory.users(),
        ..ServerConfig::default()
    };
    let served = serve_with_shutdown(listener, factory, config, shutdown).await;
    cluster.close().await;
    served.map_err(|e| e.to_string())
}

/// The cluster, once mgmd answers and registers this node.
async fn connect(mgmd_addr: &str, neighbour: Option<u16>) -> Result<Cluster, String> {
    let deadline = Instant::now() + CONNECT_PATIENCE;
    let mut wait = Duration::from_millis(100);
    loop {
        // Many sessions each send one request at a time: gather them.
        let opts = ClusterOptions {
            coalesce_sends: true,
            neighbour,
            ..ClusterOptions::default()
        };
        match Cluster::connect_with(mgmd_addr, opts).await {
            Ok(c) => return Ok(c),
            // A setting the cluster refuses (a neighbour that is no data
            // node) stays refused: say so now.
            Err(e) if e.code == ErrorCode::BadRequest => {
                return Err(format!(
                    "the cluster through mgmd at {mgmd_addr} refuses this SQL node: {e}"
                ))
            }
            Err(e) if Instant::now() < deadline => {
                tracing::info!("cluster at {mgmd_addr} not reachable yet ({e}); retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(e) => {
                return Err(format!(
                    "cannot connect to the cluster through mgmd at {mgmd_addr} for {} s: {e}",
                    CONNECT_PATIENCE.as_secs()
                ))
            }
        }
    }
}
