//! The SQL node end to end: `shoal sql` as a process on a real cluster,
//! driven by the stock MariaDB command-line client (`mariadb`, installed
//! by the test command), and `shoal up` starting one by default.

mod common;

use common::{free_port, TestCluster, SHOAL};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A `shoal sql` process; killed when dropped.
struct SqlNode {
    child: Child,
    port: u16,
}

impl Drop for SqlNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_sql(cluster: &TestCluster) -> SqlNode {
    let port = free_port();
    let log = std::fs::File::create(cluster.dir.path().join("sql.log")).unwrap();
    let child = Command::new(SHOAL)
        .args([
            "sql",
            "--connect",
            &cluster.mgmd_addr,
            "--port",
            &port.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start shoal sql");
    let node = SqlNode { child, port };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "shoal sql did not listen within 30 s: {}",
            cluster.log("sql")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    node
}

/// Runs `sql` with the `mariadb` client (batch mode: tab-separated rows,
/// no headers); `None` if the client is not installed.
fn mariadb(port: u16, database: Option<&str>, sql: &str) -> Option<Output> {
    let mut cmd = Command::new("mariadb");
    cmd.args(["--protocol=tcp", "-h", "127.0.0.1", "-P", &port.to_string()])
        .args(["-u", "root", "--batch", "--skip-column-names"]);
    if let Some(db) = database {
        cmd.args(["-D", db]);
    }
    match cmd.args(["-e", sql]).output() {
        Ok(out) => Some(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("running mariadb: {e}"),
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `sql`, which must succeed; its output.
fn query(port: u16, database: Option<&str>, sql: &str) -> String {
    let out = mariadb(port, database, sql).expect("mariadb installed");
    assert!(out.status.success(), "{sql}: {}", stderr(&out));
    stdout(&out)
}

/// Runs `sql`, which must fail with MySQL error `code`.
fn fails(port: u16, database: Option<&str>, sql: &str, code: u16) -> String {
    let out = mariadb(port, database, sql).expect("mariadb installed");
    let err = stderr(&out);
    assert!(!out.status.success(), "{sql} succeeded: {}", stdout(&out));
    assert!(err.contains(&format!("ERROR {code}")), "{sql}: {err}");
    err
}

#[test]
fn the_mariadb_client_creates_writes_and_reads_through_an_sql_node() {
    if mariadb(1, None, "").is_none() {
        eprintln!("mariadb (the client) is not installed: skipped (scripts/test.sh installs it)");
        return;
    }
    let cluster = TestCluster::start_nodes(2, 2, |_| {});
    let sql = start_sql(&cluster);
    let p = sql.port;

    query(p, None, "CREATE DATABASE shop");
    assert!(query(p, None, "SHOW DATABASES")
        .lines()
        .any(|l| l == "shop"));
    query(
        p,
        Some("shop"),
        "CREATE TABLE items (id INT UNSIGNED NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL, \
         price BIGINT, UNIQUE KEY by_name (name), KEY by_price (price)) ENGINE=NDBCLUSTER",
    );
    query(
        p,
        Some("shop"),
        "INSERT INTO items VALUES (1, 'apple', 30), (2, 'pear', 45), (3, 'fig', NULL)",
    );
    assert_eq!(
        query(
            p,
            Some("shop"),
            "SELECT id, name, price FROM items ORDER BY id"
        ),
        "1\tapple\t30\n2\tpear\t45\n3\tfig\tNULL\n"
    );
    // By primary key, by unique key, by a range of the ordered index.
    assert_eq!(
        query(p, Some("shop"), "SELECT name FROM items WHERE id = 2"),
        "pear\n"
    );
    assert_eq!(
        query(p, Some("shop"), "SELECT id FROM items WHERE name = 'fig'"),
        "3\n"
    );
    assert_eq!(
        query(
            p,
            Some("shop"),
            "SELECT id FROM items WHERE price >= 30 ORDER BY price"
        ),
        "1\n2\n"
    );
    // Errors with MySQL's codes; the node goes on.
    fails(
        p,
        Some("shop"),
        "INSERT INTO items VALUES (1, 'plum', 1)",
        1062,
    );
    fails(
        p,
        Some("shop"),
        "INSERT INTO items VALUES (9, 'apple', 1)",
        1062,
    );
    fails(p, Some("shop"), "SELECT * FROM nope", 1146);
    fails(p, Some("shop"), "SELEKT 1", 1064);
    // A transaction rolled back leaves nothing; a committed one stays.
    query(
        p,
        Some("shop"),
        "BEGIN; UPDATE items SET price = 99 WHERE id = 1; ROLLBACK",
    );
    assert_eq!(
        query(p, Some("shop"), "SELECT price FROM items WHERE id = 1"),
        "30\n"
    );
    query(
        p,
        Some("shop"),
        "START TRANSACTION; UPDATE items SET price = price + 1 WHERE price > 40; DELETE FROM items WHERE id = 3; COMMIT",
    );
    assert_eq!(
        query(p, Some("shop"), "SELECT id, price FROM items ORDER BY id"),
        "1\t30\n2\t46\n"
    );

    // The native API sees the same table, and writes SQL then reads.
    let rt = common::runtime();
    rt.block_on(async {
        let c = shoal_client::Cluster::connect(&cluster.mgmd_addr)
            .await
            .unwrap();
        let t = c.table("shop.items").await.unwrap();
        let rec = t.full_record();
        let mut tx = c.transaction();
        let op = tx
            .read(
                &rec,
                &[shoal_client::Value::UInt(2)],
                shoal_client::LockMode::CommittedRead,
            )
            .unwrap();
        tx.execute(shoal_client::ExecType::Commit).await.unwrap();
        let row = tx.row(op).expect("row 2");
        assert_eq!(
            row.get("name"),
            Some(shoal_client::Value::Str("pear".into()))
        );
        let mut tx = c.transaction();
        tx.insert(
            &rec,
            &[
                shoal_client::Value::UInt(7),
                shoal_client::Value::Str("kiwi".into()),
                shoal_client::Value::Int(12),
            ],
        )
        .unwrap();
        tx.execute(shoal_client::ExecType::Commit).await.unwrap();
        c.close().await;
    });
    assert_eq!(
        query(p, Some("shop"), "SELECT name FROM items WHERE id = 7"),
        "kiwi\n"
    );

    // Bad input: a wrong password is refused; a malformed packet closes
    // only its own connection.
    let out = Command::new("mariadb")
        .args(["--protocol=tcp", "-h", "127.0.0.1", "-P", &p.to_string()])
        .args(["-u", "root", "-pwrong", "-e", "SELECT 1"])
        .output()
        .unwrap();
    assert!(stderr(&out).contains("ERROR 1045"), "{}", stderr(&out));
    {
        use std::io::{Read, Write};
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", p)).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut greeting = [0u8; 512];
        let _ = raw.read(&mut greeting).unwrap();
        raw.write_all(&[0xff, 0xff, 0xff, 1, 0, 0, 0]).unwrap();
        let mut rest = Vec::new();
        let _ = raw.read_to_end(&mut rest);
    }
    assert_eq!(
        query(
            p,
            Some("shop"),
            "SELECT id FROM items WHERE id > 0 ORDER BY id"
        ),
        "1\n2\n7\n"
    );
    query(p, None, "DROP DATABASE shop");
    fails(p, None, "USE shop", 1049);
}
