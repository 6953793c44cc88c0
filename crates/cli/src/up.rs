//! `shoal up`: a whole local cluster in one command. Writes a config into
//! the data dir, starts mgmd and the data nodes as child processes on
//! 127.0.0.1, prints how to connect once every data node is started, keeps
//! them running (restarting any that exits, see [`crate::supervisor`]),
//! and on Ctrl-C / SIGTERM stops every child (no orphans: each child also
//! gets SIGTERM from the kernel if this process dies).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::supervisor::{Program, Supervisor, STOP};

/// How long the first start of the whole cluster may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(clap::Args)]
pub struct UpArgs {
    /// Where mgmd and the data nodes keep their files.
    #[arg(long, default_value = ".shoal")]
    pub data_dir: PathBuf,
    /// Number of data nodes (ids 1..=N; node groups of `--replicas` nodes
    /// in id order).
    #[arg(long, default_value_t = 2)]
    pub data_nodes: u32,
    /// Replicas per fragment (NoOfReplicas); data nodes must be a multiple.
    #[arg(long, default_value_t = 2)]
    pub replicas: u32,
    /// mgmd port.
    #[arg(long, default_value_t = 1186)]
    pub mgm_port: u16,
    /// Data memory per data node (e.g. 512M, 2G).
    #[arg(long)]
    pub data_memory: Option<String>,
    /// Pin data node N to CPU core (N-1) % cores (for benchmarks).
    #[arg(long)]
    pub pin: bool,
    /// The data nodes' `spin_us`: after work, poll this many µs before
    /// sleeping (lower latency at the cost of a busy core; default 0, at most
    /// 10000).
    #[arg(long)]
    pub spin_us: Option<u32>,
    /// Start the data nodes with no rows: delete their redo logs and
    /// sysfiles first (tables stay defined in mgmd).
    #[arg(long)]
    pub initial: bool,
    /// Keep rows in memory only (no redo log, no epochs): a stop of the
    /// whole cluster loses every row.
    #[arg(long)]
    pub diskless: bool,
    /// SQL nodes (MySQL protocol) to start; 0 for none.
    #[arg(long, default_value_t = 1)]
    pub sql_nodes: u32,
    /// The first SQL node's port (the next ones take the ports after it).
    /// Default: 3306, or the first free port after it.
    #[arg(long)]
    pub sql_port: Option<u16>,
}

/// The SQL nodes' first port: `--sql-port` if given (it must be free, as
/// must the ones after it), else the first run of free ports from 3306.
fn sql_ports(args: &UpArgs) -> Result<Vec<u16>, String> {
    let n = args.sql_nodes as usize;
    let all_free = |first: u16| (0..n).all(|i| first.checked_add(i as u16).is_some_and(port_free));
    let first = match args.sql_port {
        Some(p) if all_free(p) => p,
        Some(p) => {
            return Err(format!(
                "--sql-port {p}: port {p} (or one of the {n} from it) on 127.0.0.1 is taken; pass another"
            ))
        }
        None => (3306u16..3406)
            .find(|&p| all_free(p))
            .ok_or("no free ports for SQL nodes from 3306 to 3405; pass --sql-port")?,
    };
    Ok((0..n).map(|i| first + i as u16).collect())
}

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

pub fn run(args: UpArgs) -> Result<(), String> {
    if args.data_nodes == 0
        || args.replicas == 0
        || args.replicas > 4
        || !args.data_nodes.is_multiple_of(args.replicas)
    {
        return Err(format!(
            "--data-nodes {} must be a positive multiple of --replicas {} (1..=4)",
            args.data_nodes, args.replicas
        ));
    }
    std::fs::create_dir_all(&args.data_dir)
        .map_err(|e| format!("cannot create {}: {e}", args.data_dir.display()))?;
    let data_dir = std::fs::canonicalize(&args.data_dir).map_err(|e| e.to_string())?;
    // Held until this `shoal up` ends: a second one on the same directory
    // would start a second cluster over this one's files.
    let _dir_lock = shoal_mgmd::dir_lock::DirLock::acquire(&data_dir, "up.lock", "shoal up")
        .map_err(|e| e.detail)?;
    if !port_free(args.mgm_port) {
        return Err(format!(
            "port {} on 127.0.0.1 is taken (another cluster running?); stop it or pass --mgm-port",
            args.mgm_port
        ));
    }
    let mut config =
        shoal_mgmd::ClusterConfig::local(args.data_nodes, args.replicas, args.mgm_port, &data_dir);
    config.diskless = args.diskless;
    if let Some(spin) = args.spin_us {
        config.spin_us = spin;
    }
    if let Some(m) = &args.data_memory {
        config.data_memory_bytes =
            shoal_mgmd::config::parse_byte_size(m).map_err(|e| format!("--data-memory: {e}"))?;
    }
    config.validate().map_err(|e| e.to_string())?;
    let config_path = data_dir.join("config.toml");
    std::fs::write(&config_path, config.to_toml())
        .map_err(|e| format!("cannot write {}: {e}", config_path.display()))?;

    // SAFETY: installing a handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let connect = config.mgmd_addr();
    let sql_ports = sql_ports(&args)?;
    let programs = programs(&exe, &args, &config_path, &connect, &sql_ports);
    let mut supervisor = Supervisor::new(programs, &data_dir, &connect);
    // One thread for everything: the children's PR_SET_PDEATHSIG is tied
    // to the thread that forked them (see `supervisor`).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let banner = || {
        println!(
            "Shoal cluster is up: {} data node(s), {} replica(s).",
            args.data_nodes, args.replicas
        );
        println!("  connect string:  {connect}");
        println!("  config:          {}", config_path.display());
        println!("  logs, pid files: {}/*.log, *.pid", data_dir.display());
        for (i, port) in sql_ports.iter().enumerate() {
            println!(
                "  SQL node {}:      mariadb -h 127.0.0.1 -P {port} -u root   (MySQL protocol; root has no password, from 127.0.0.1 only)",
                i + 1
            );
        }
        println!("Data nodes and mgmd that exit are restarted.");
        println!("Next:");
        println!("  shoal mgm --connect {connect} -e show");
        println!("  shoal mgm --connect {connect} -e \"all restart\"   (rolling restart)");
        println!("  cargo run --release --example quickstart -p shoal-client -- {connect}");
        println!("  shoal bench flexasynch --connect {connect} -t 1 -p 128 -o 100 -a 2");
        println!("Press Ctrl-C to stop.");
    };
    println!(
        "Starting a Shoal cluster in {}: mgmd on {connect}, {} data node(s)...",
        data_dir.display(),
        args.data_nodes
    );
    rt.block_on(async {
        if let Err(e) = supervisor.start_all().await {
            supervisor.stop_all();
            return Err(e);
        }
        let result = supervisor.run(START_TIMEOUT, banner).await;
        if result.is_ok() {
            println!("stopped.");
        }
        result
    })
}

/// mgmd first, then data nodes 1..=N (optionally pinned with taskset),
/// then the SQL nodes.
fn programs(
    exe: &std::path::Path,
    args: &UpArgs,
    config_path: &std::path::Path,
    connect: &str,
    sql_ports: &[u16],
) -> Vec<Program> {
    let mut programs = vec![Program {
        name: "mgmd".into(),
        data_node: None,
        exe: exe.to_path_buf(),
        args: vec![
            "mgmd".into(),
            "--config".into(),
            config_path.display().to_string(),
        ],
        first_args: Vec::new(),
    }];
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    for id in 1..=args.data_nodes {
        let mut cmd_args = vec![
            "datanode".into(),
            "--connect".into(),
            connect.to_string(),
            "--node-id".into(),
            id.to_string(),
        ];
        let child_exe = if args.pin {
            let mut a = vec![
                "-c".into(),
                ((id as usize - 1) % cores).to_string(),
                exe.display().to_string(),
            ];
            a.append(&mut cmd_args);
            cmd_args = a;
            PathBuf::from("taskset")
        } else {
            exe.to_path_buf()
        };
        programs.push(Program {
            name: format!("datanode-{id}"),
            data_node: Some(id as u16),
            exe: child_exe,
            args: cmd_args,
            first_args: if args.initial {
                vec!["--initial".into()]
            } else {
                Vec::new()
            },
        });
    }
    for (i, port) in sql_ports.iter().enumerate() {
        programs.push(Program {
            name: format!("sql-{}", i + 1),
            data_node: None,
            exe: exe.to_path_buf(),
            args: vec![
                "sql".into(),
                "--connect".into(),
                connect.to_string(),
                "--port".into(),
                port.to_string(),
            ],
            first_args: Vec::new(),
        });
    }
    programs
}
