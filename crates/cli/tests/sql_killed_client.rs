//! A client killed mid-query costs the SQL node that connection and
//! nothing else: the node stays up and serves the other clients, the
//! dead client's open transaction is rolled back (its row locks freed at
//! once, not after a lock wait timeout), and committed data is as it
//! was. The clients: the stock `mariadb` client killed with SIGKILL while
//! a long result streams to it or while its transaction holds locks, and
//! raw TCP clients that send a query and close (or reset) the socket
//! before reading the answer.

mod common;

use common::raw_mysql::{login, read_packet, send_query};
use common::sql_node::{mariadb, query, start_sql, stderr, SqlNode};
use common::TestCluster;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Rows of the table the clients read and lock.
const ROWS: u32 = 4000;

/// Rows per INSERT when the table is filled.
const ROWS_PER_INSERT: u32 = 500;

/// Rows the killed transaction locks (ids 1..=LOCKED).
const LOCKED: u32 = 100;

/// How long a client may take to show that its query runs, and how long
/// the rows a dead client had locked may stay locked. The cluster's lock
/// wait timeout is far longer ([`LOCK_WAIT_MS`]), so a lock freed in time
/// was freed by the rollback, not by a lock wait timing out.
const WAIT: Duration = Duration::from_secs(10);

/// The cluster's lock wait timeout (`deadlock_timeout_ms`).
const LOCK_WAIT_MS: u64 = 60_000;

const DB: &str = "killed";

/// The first column of the single row `sql` answers.
fn one(port: u16, sql: &str) -> String {
    let out = query(port, Some(DB), sql);
    out.lines().next().unwrap_or_default().to_string()
}

/// `COUNT(*)`, `SUM(v)` and the sum of the pads' lengths: what must not
/// change unless a committed statement changes it.
fn checksum(port: u16) -> String {
    one(
        port,
        "SELECT CONCAT(COUNT(*), ' ', SUM(v), ' ', SUM(LENGTH(pad))) FROM big",
    )
}

/// The lines a child prints, read by a thread, so that a test can wait
/// for one with a deadline.
struct Lines(mpsc::Receiver<String>);

impl Lines {
    fn of(stdout: ChildStdout) -> Lines {
        // Bounded: a line not yet taken stops the reader, the pipe fills
        // and the client stalls, so a long answer is still on its way
        // (the node still writing) when the test kills the client.
        let (tx, rx) = mpsc::sync_channel(1);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines(rx)
    }

    /// Waits (at most [`WAIT`]) for a line equal to `want`; panics with
    /// what came instead.
    fn wait_for(&self, want: &str, child: &mut Child) {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.0.recv_timeout(left) {
                Ok(line) if line == want => return,
                Ok(_) => {}
                Err(e) => {
                    let _ = child.kill();
                    let out = child.wait_with_output_or_default();
                    panic!("no line {want:?} from the client ({e}); its stderr: {out}");
                }
            }
        }
    }

    /// The next line, within [`WAIT`].
    fn next(&self) -> String {
        self.0
            .recv_timeout(WAIT)
            .expect("a line from the client in time")
    }
}

trait StderrOf {
    fn wait_with_output_or_default(&mut self) -> String;
}

impl StderrOf for Child {
    /// The stderr of a child that has exited (or was killed).
    fn wait_with_output_or_default(&mut self) -> String {
        let _ = self.wait();
        let mut err = String::new();
        if let Some(mut e) = self.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        err
    }
}

/// A `mariadb` client on the test database with piped stdin and stdout
/// (`--unbuffered`: each answer is flushed when it is printed).
fn client(port: u16, extra: &[&str]) -> Child {
    Command::new("mariadb")
        .args(["--protocol=tcp", "-h", "127.0.0.1", "-P", &port.to_string()])
        .args([
            "-u",
            "root",
            "--batch",
            "--skip-column-names",
            "--unbuffered",
        ])
        .args(["-D", DB])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the mariadb client (scripts/test.sh installs it)")
}

/// Kills `child` with SIGKILL (std's `Child::kill` on Unix) and reaps it.
fn kill(mut child: Child) {
    child.kill().expect("SIGKILL the client");
    let _ = child.wait();
}

fn setup(port: u16) -> String {
    query(port, None, &format!("CREATE DATABASE {DB}"));
    query(
        port,
        Some(DB),
        "CREATE TABLE big (id INT NOT NULL PRIMARY KEY, v INT NOT NULL, pad VARCHAR(200) NOT NULL); \
         CREATE TABLE copy (id INT NOT NULL PRIMARY KEY, v INT NOT NULL, pad VARCHAR(200) NOT NULL)",
    );
    let pad = "x".repeat(200);
    for start in (1..=ROWS).step_by(ROWS_PER_INSERT as usize) {
        let values: Vec<String> = (start..start + ROWS_PER_INSERT)
            .map(|id| format!("({id}, {id}, '{pad}')"))
            .collect();
        query(
            port,
            Some(DB),
            &format!("INSERT INTO big VALUES {}", values.join(", ")),
        );
    }
    let sum = u64::from(ROWS) * u64::from(ROWS + 1) / 2;
    let before = checksum(port);
    assert_eq!(before, format!("{ROWS} {sum} {}", u64::from(ROWS) * 200));
    before
}

/// The node still runs and answers a new client.
fn assert_serving(sql: &mut SqlNode) {
    assert!(sql.is_running(), "the SQL node exited");
    assert_eq!(query(sql.port, None, "SELECT 1 + 1"), "2\n");
}

#[test]
fn a_client_killed_mid_query_costs_the_sql_node_only_its_connection() {
    let cluster = TestCluster::start_nodes(2, 2, |c| c.deadlock_timeout_ms = LOCK_WAIT_MS);
    let mut sql = start_sql(&cluster);
    let p = sql.port;
    let before = setup(p);

    // A long result killed while it streams: with --quick the client
    // prints rows as they come, so a first row means the answer is on
    // its way; the test takes no more lines, so the client stalls with
    // far more (4000 rows of 1600 bytes) than the socket and pipe hold
    // still to come, and the node is still writing.
    let wide = "SELECT id, CONCAT(pad, pad, pad, pad, pad, pad, pad, pad) FROM big";
    for _ in 0..3 {
        let mut c = client(p, &["--quick", "-e", wide]);
        let lines = Lines::of(c.stdout.take().expect("stdout"));
        let first = lines.next();
        assert!(first.contains('\t'), "a row, not {first:?}");
        kill(c);
        assert_serving(&mut sql);
    }
    assert_eq!(checksum(p), before);

    // A transaction holding row locks (FOR UPDATE, an UPDATE, and an
    // INSERT ... SELECT not committed), its client killed while it waits
    // for its next statement.
    let mut c = client(p, &[]);
    let lines = Lines::of(c.stdout.take().expect("stdout"));
    let mut stdin = c.stdin.take().expect("stdin");
    writeln!(
        stdin,
        "BEGIN; SELECT COUNT(*) FROM big WHERE id <= {LOCKED} FOR UPDATE; \
         UPDATE big SET v = -1 WHERE id <= {half}; INSERT INTO copy SELECT * FROM big; \
         SELECT 'locked';",
        half = LOCKED / 2
    )
    .expect("write to the client");
    stdin.flush().expect("flush");
    lines.wait_for(&LOCKED.to_string(), &mut c);
    lines.wait_for("locked", &mut c);
    kill(c);
    drop(stdin);
    assert_serving(&mut sql);

    // Another session takes the same rows' locks. Were they still held,
    // the UPDATE would wait LOCK_WAIT_MS and fail; it must get them well
    // before that.
    let started = Instant::now();
    let out = mariadb(
        p,
        Some(DB),
        &format!("UPDATE big SET v = v + 1 WHERE id <= {LOCKED}"),
    );
    let waited = started.elapsed();
    assert!(
        out.status.success(),
        "the killed client's locks are still held: {}",
        stderr(&out)
    );
    assert!(
        waited < WAIT,
        "the UPDATE waited {waited:?} for the killed client's locks"
    );
    // The killed transaction left nothing; the UPDATE after it counts.
    assert_eq!(one(p, "SELECT COUNT(*) FROM copy"), "0");
    assert_eq!(one(p, "SELECT COUNT(*) FROM big WHERE v < 0"), "0");
    query(
        p,
        Some(DB),
        &format!("UPDATE big SET v = v - 1 WHERE id <= {LOCKED}"),
    );
    assert_eq!(checksum(p), before);

    // Raw clients: log in, send a query, go away before the answer.
    for reset in [false, true] {
        let mut s = login(p);
        send_query(&mut s, wide);
        if reset {
            reset_on_close(&s);
        }
        drop(s);
        assert_serving(&mut sql);
    }
    // A transaction's locks, the client gone once the statement that took
    // them has answered (so they are held when it goes: the UPDATE after
    // it can only pass once the node has rolled the transaction back).
    let mut s = login(p);
    send_query(
        &mut s,
        &format!("BEGIN; UPDATE {DB}.big SET v = -1 WHERE id <= {LOCKED}"),
    );
    for statement in ["BEGIN", "UPDATE"] {
        let (_, answer) = read_packet(&mut s);
        assert_eq!(answer.first(), Some(&0x00), "{statement}: {answer:?}");
    }
    drop(s);
    let started = Instant::now();
    query(
        p,
        Some(DB),
        &format!("UPDATE big SET v = v + 0 WHERE id <= {LOCKED}"),
    );
    assert!(started.elapsed() < WAIT);
    // A packet cut short: the header promises more than comes.
    let mut s = login(p);
    s.write_all(&[100, 0, 0, 0, 3, b'S', b'E', b'L'])
        .expect("write");
    drop(s);
    assert_serving(&mut sql);
    assert_eq!(checksum(p), before);
    let log = sql.log();
    assert!(!log.contains("panicked"), "the SQL node panicked:\n{log}");
}

/// Makes closing `s` send a reset rather than a FIN (SO_LINGER 0).
fn reset_on_close(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor and a pointer to a linger struct
    // of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt SO_LINGER");
}
