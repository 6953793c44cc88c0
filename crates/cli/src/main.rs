//! `shoal`: the one user-facing binary. Thin: each subcommand parses its
//! flags and calls into the crate that does the work.

mod mgm;
mod supervisor;
mod up;

/// jemalloc: the data node and the client free on one thread what another
/// allocated, where glibc malloc is several times slower.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation (`_RJEM_MALLOC_CONF`
/// in the environment still overrides them). Each thread keeps up to 2048
/// freed objects per small size class (jemalloc's default: 200). A data
/// node frees a frame's messages in bursts of hundreds; with the default
/// cache each burst went back to the arena and was fetched again: 3.6 %
/// of a data node's instructions in 25-column reads, whose rate rose 7 %
/// (docs/BENCHMARKS.md, "Reads from a template"). The cost: at most a few
/// MiB of freed small objects kept per thread; jemalloc trims a cache
/// gradually while its thread allocates, and an idle thread keeps its.
#[unsafe(export_name = "_rjem_malloc_conf")]
#[allow(non_upper_case_globals)]
pub static malloc_conf: Option<&'static u8> =
    Some(&b"tcache_nslots_small_max:2048,lg_tcache_nslots_mul:3\0"[0]);

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "shoal",
    version,
    about = "Shoal: a distributed in-memory transactional database (NDB architecture)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a whole local cluster (mgmd, data nodes, an SQL node) on 127.0.0.1 and keep
    /// it running (restarts what exits); Ctrl-C stops it.
    Up(up::UpArgs),
    /// Run the management server.
    Mgmd {
        /// The cluster config file (TOML; see docs/CONFIG.md).
        #[arg(long)]
        config: std::path::PathBuf,
    },
    /// Run a data node.
    Datanode {
        /// mgmd address.
        #[arg(long, default_value = "127.0.0.1:1186")]
        connect: String,
        /// Node id to take (default: the first free data node id in the config).
        #[arg(long)]
        node_id: Option<u16>,
        /// Delete this node's redo log and sysfile first: it starts with
        /// no rows (it copies them from live replicas, or the cluster
        /// starts empty).
        #[arg(long)]
        initial: bool,
    },
    /// Admin client: `shoal mgm -e show`, `-e "2 restart"`, `-e "all restart"`,
    /// `shoal mgm wait`.
    Mgm(mgm::MgmArgs),
    /// Compare every replica of every fragment row by row (run it while
    /// nothing writes); exits non-zero if any differ.
    Verify {
        /// mgmd address.
        #[arg(long, default_value = "127.0.0.1:1186")]
        connect: String,
    },
    /// Run an SQL node: the MySQL protocol on a port, for stock clients
    /// (`mariadb -h 127.0.0.1 -P 3306 -u root`), connectors and sysbench.
    Sql {
        /// mgmd address.
        #[arg(long, default_value = "127.0.0.1:1186")]
        connect: String,
        /// The port to serve the MySQL protocol on.
        #[arg(long, default_value_t = 3306)]
        port: u16,
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1")]
        bind: String,
        /// Threads serving connections (tokio workers). Default: half of
        /// this machine's cores, at least one — the SQL node usually
        /// shares the machine with data nodes, and on two cores one
        /// thread serves more queries than two (docs/BENCHMARKS.md).
        #[arg(long)]
        threads: Option<usize>,
        /// Memory one statement may hold, in MiB: rows read for a sort no
        /// index serves, a join, INSERT … SELECT or a subquery; a quarter
        /// of it for a grouping's groups and for a result built whole
        /// (GROUP BY, UNION, SHOW). Past it the statement fails with 1038.
        /// Plain SELECTs stream their rows and hold none.
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
        query_memory_mb: u64,
        /// The data node on this SQL node's host (NDB's
        /// ndb_data_node_neighbour): transactions on READ_BACKUP tables
        /// with a replica there, and scans, start there, so its replicas
        /// serve committed reads.
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
        neighbour: Option<u16>,
    },
    /// Benchmarks: `shoal bench flexasynch -t 1 -p 256 ...` (NDB's flags),
    /// `shoal bench readperf -c -d -s 1000000 -r 1000` (NDB's testReadPerf),
    /// `shoal bench bank --accounts 1000 --threads 8 --duration-secs 10`.
    Bench {
        /// The benchmark: flexasynch, readperf or bank.
        name: String,
        /// The benchmark's own flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SHOAL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let result: Result<(), String> = match cli.command {
        Command::Up(args) => up::run(args),
        Command::Mgmd { config } => run_mgmd(&config),
        Command::Datanode {
            connect,
            node_id,
            initial,
        } => shoal_runtime::run_datanode(shoal_runtime::DataNodeOptions {
            mgmd_addr: connect,
            node_id,
            initial,
        })
        .map_err(|e| e.to_string()),
        Command::Mgm(args) => mgm::run(args),
        Command::Verify { connect } => verify(&connect),
        Command::Sql {
            connect,
            port,
            bind,
            threads,
            query_memory_mb,
            neighbour,
        } => run_sql(
            shoal_sql::node::SqlNodeOptions {
                mgmd_addr: connect,
                bind,
                port,
                neighbour,
                limits: shoal_sql::exec::Limits::with_query_memory(
                    usize::try_from(query_memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
                ),
            },
            threads,
        ),
        Command::Bench { name, args } => match name.as_str() {
            "flexasynch" | "flexAsynch" => shoal_bench::flexasynch::main(&args),
            "readperf" | "testReadPerf" => shoal_bench::readperf::main(&args),
            "bank" => shoal_bench::bank::main(&args),
            other => Err(format!(
                "unknown benchmark {other:?}; available: flexasynch, readperf, bank"
            )),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shoal: {e}");
            ExitCode::FAILURE
        }
    }
}

fn verify(connect: &str) -> Result<(), String> {
    tokio_runtime().block_on(async {
        let cluster = shoal_client::Cluster::connect(connect)
            .await
            .map_err(|e| e.to_string())?;
        let report = cluster
            .compare_replicas()
            .await
            .map_err(|e| e.to_string())?;
        cluster.close().await;
        println!("{report}");
        if report.identical() {
            Ok(())
        } else {
            Err("replicas differ".into())
        }
    })
}

fn run_sql(opts: shoal_sql::node::SqlNodeOptions, threads: Option<usize>) -> Result<(), String> {
    let threads =
        threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() / 2));
    // Deep stacks: parsing and planning recurse over a statement's tree
    // (operators per statement are bounded, see `exec::split`).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.clamp(1, 64))
        .thread_stack_size(32 << 20)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(shoal_sql::node::run(opts, stop_signal()))
}

/// Completes on Ctrl-C or SIGTERM.
async fn stop_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

fn run_mgmd(config_path: &std::path::Path) -> Result<(), String> {
    let config = shoal_mgmd::ClusterConfig::load(config_path).map_err(|e| e.to_string())?;
    let addr = config.mgmd_addr();
    tokio_runtime().block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|e| {
            format!("mgmd cannot listen on {addr} (is the port taken by another process?): {e}")
        })?;
        eprintln!("mgmd listening on {addr}");
        let shutdown = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        };
        shoal_mgmd::server::run(config, listener, shutdown)
            .await
            .map_err(|e| e.to_string())
    })
}

#[cfg(test)]
mod tests {
    /// Reads one of jemalloc's options.
    fn option<T: Default>(name: &std::ffi::CStr) -> T {
        let mut value = T::default();
        let mut len = std::mem::size_of::<T>();
        // SAFETY: `value` and `len` describe a `T`, which each caller
        // matches to the option's C type; `name` is NUL-terminated.
        let r = unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                (&mut value as *mut T).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        assert_eq!(r, 0, "mallctl {name:?}");
        value
    }

    /// The options above are the allocator's (a renamed symbol or a
    /// misspelt option would drop them with at most a warning). Fails if
    /// `_RJEM_MALLOC_CONF` in the environment sets them otherwise.
    #[test]
    fn the_allocator_keeps_bursts_of_frees() {
        assert_eq!(option::<u32>(c"opt.tcache_nslots_small_max"), 2048);
        assert_eq!(option::<isize>(c"opt.lg_tcache_nslots_mul"), 3);
    }
}
