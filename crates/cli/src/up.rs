//! `shoal up`: a whole local cluster in one command. Writes a config into
//! the data dir, starts mgmd and the data nodes as child processes on
//! 127.0.0.1, waits until every data node is started, prints how to
//! connect, and on Ctrl-C / SIGTERM stops every child (no orphans: each
//! child also gets SIGTERM from the kernel if this process dies).

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn spawn(exe: &PathBuf, args: &[String], log: &std::path::Path) -> Result<Child, String> {
    let log_file =
        std::fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args(args).stdout(log_file).stderr(log_err);
    // SAFETY: prctl and setpgid are async-signal-safe; nothing else runs
    // between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            // Own process group: a terminal Ctrl-C reaches only `shoal up`,
            // which then stops the children in order.
            libc::setpgid(0, 0);
            Ok(())
        });
    }
    cmd.spawn()
        .map_err(|e| format!("cannot start {} {}: {e}", exe.display(), args.join(" ")))
}

fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

pub fn run(args: UpArgs) -> Result<(), String> {
    if args.data_nodes == 0
        || args.replicas == 0
        || args.replicas > 4
        || args.data_nodes % args.replicas != 0
    {
        return Err(format!(
            "--data-nodes {} must be a positive multiple of --replicas {} (1..=4)",
            args.data_nodes, args.replicas
        ));
    }
    if !port_free(args.mgm_port) {
        return Err(format!(
            "port {} on 127.0.0.1 is taken (another cluster running?); stop it or pass --mgm-port",
            args.mgm_port
        ));
    }
    std::fs::create_dir_all(&args.data_dir)
        .map_err(|e| format!("cannot create {}: {e}", args.data_dir.display()))?;
    let data_dir = std::fs::canonicalize(&args.data_dir).map_err(|e| e.to_string())?;
    let mut config =
        shoal_mgmd::ClusterConfig::local(args.data_nodes, args.replicas, args.mgm_port, &data_dir);
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
    let mut children: Vec<(String, Child)> = Vec::new();
    let result = start_all(
        &exe,
        &args,
        &config_path,
        &data_dir,
        &connect,
        &mut children,
    );
    if let Err(e) = result {
        stop_all(&mut children);
        return Err(e);
    }
    println!(
        "Shoal cluster is up: {} data node(s), {} replica(s).",
        args.data_nodes, args.replicas
    );
    println!("  connect string:  {connect}");
    println!("  config:          {}", config_path.display());
    println!("  logs:            {}/*.log", data_dir.display());
    println!("Next:");
    println!("  shoal mgm --connect {connect} -e show");
    println!("  cargo run --release --example quickstart -p shoal-client -- {connect}");
    println!("  shoal bench flexasynch --connect {connect} -t 1 -p 128 -o 100 -a 2");
    println!("Press Ctrl-C to stop.");
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
        for (name, child) in children.iter_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                eprintln!(
                    "{name} exited ({status}); stopping the cluster. See {}/{name}.log",
                    data_dir.display()
                );
                STOP.store(true, Ordering::SeqCst);
            }
        }
    }
    println!("stopping...");
    stop_all(&mut children);
    println!("stopped.");
    Ok(())
}

fn start_all(
    exe: &PathBuf,
    args: &UpArgs,
    config_path: &std::path::Path,
    data_dir: &std::path::Path,
    connect: &str,
    children: &mut Vec<(String, Child)>,
) -> Result<(), String> {
    let mgmd = spawn(
        exe,
        &[
            "mgmd".into(),
            "--config".into(),
            config_path.display().to_string(),
        ],
        &data_dir.join("mgmd.log"),
    )?;
    children.push(("mgmd".into(), mgmd));
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(connect).is_err() {
        if Instant::now() > deadline || STOP.load(Ordering::SeqCst) {
            return Err(format!(
                "mgmd did not start listening on {connect}; see {}/mgmd.log",
                data_dir.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    for id in 1..=args.data_nodes {
        let name = format!("datanode-{id}");
        let mut cmd_args = vec![
            "datanode".into(),
            "--connect".into(),
            connect.to_string(),
            "--node-id".into(),
            id.to_string(),
        ];
        let child_exe;
        if args.pin {
            child_exe = PathBuf::from("taskset");
            let mut a = vec![
                "-c".into(),
                ((id as usize - 1) % cores).to_string(),
                exe.display().to_string(),
            ];
            a.append(&mut cmd_args);
            cmd_args = a;
        } else {
            child_exe = exe.clone();
        }
        let child = spawn(&child_exe, &cmd_args, &data_dir.join(format!("{name}.log")))?;
        children.push((name, child));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(shoal_mgmd::client::wait_started(
        connect,
        Duration::from_secs(60),
    ))
    .map_err(|e| format!("{e}; see the logs in {}", data_dir.display()))?;
    Ok(())
}

/// SIGTERM to every child (data nodes first, mgmd last), then SIGKILL
/// whatever has not exited after 5 seconds.
fn stop_all(children: &mut [(String, Child)]) {
    for (_, child) in children.iter_mut().rev() {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    for (name, child) in children.iter_mut().rev() {
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    eprintln!("{name} did not stop in time; killing it");
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
            }
        }
    }
}
