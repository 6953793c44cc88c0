//! The SQL node end to end: `shoal sql` as a process on a real cluster,
//! driven by the stock MariaDB command-line client (`mariadb`, installed
//! by the test command), and `shoal up` starting one by default.

mod common;

use common::raw_mysql::{login, read_packet, send_query};
use common::sql_node::{fails, query, start_sql, start_sql_with, stderr};
use common::TestCluster;
use std::process::Command;
use std::time::Duration;

#[test]
fn the_mariadb_client_creates_writes_and_reads_through_an_sql_node() {
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

    // A second SQL node whose neighbour is data node 2 reads a
    // READ_BACKUP table and sees what the first wrote (where its
    // transactions start is checked in index_scans.rs, `check_neighbour`);
    // a neighbour that is no data node is refused at once, not retried.
    query(
        p,
        Some("shop"),
        "CREATE TABLE near (id INT PRIMARY KEY, v INT) COMMENT='NDB_TABLE=READ_BACKUP=1'",
    );
    query(
        p,
        Some("shop"),
        "INSERT INTO near VALUES (1, 10), (2, 20), (3, 30)",
    );
    let beside = start_sql_with(&cluster, &["--neighbour", "2"]);
    assert_eq!(
        query(
            beside.port,
            Some("shop"),
            "SELECT id, v FROM near WHERE id = 2"
        ),
        "2\t20\n"
    );
    assert_eq!(
        query(beside.port, Some("shop"), "SELECT SUM(v) FROM near"),
        "60\n"
    );
    let out = Command::new(common::SHOAL)
        .args(["sql", "--connect", &cluster.mgmd_addr, "--port", "0"])
        .args(["--neighbour", "9"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("refuses this SQL node")
            && stderr(&out).contains("neighbour node 9 is not a data node"),
        "{}",
        stderr(&out)
    );
    drop(beside);

    query(p, None, "DROP DATABASE shop");
    fails(p, None, "USE shop", 1049);
}

/// A result far larger than what a statement may hold streams to the
/// client: the SQL node holds 1 MiB per statement here
/// (`--query-memory-mb 1`) and returns 4 MB of rows. What must be held (a
/// sort no index serves, a grouping) fails with 1038 past the bound,
/// and the node goes on.
#[test]
fn a_result_larger_than_a_statements_memory_streams() {
    let cluster = TestCluster::start();
    let mut sql = start_sql_with(&cluster, &["--query-memory-mb", "1"]);
    let p = sql.port;
    query(p, None, "CREATE DATABASE big");
    query(
        p,
        Some("big"),
        "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(1000) NOT NULL)",
    );
    const ROWS: usize = 4000;
    let text = |id: usize| format!("{id:04}{}", "x".repeat(996));
    // 100 KB per statement: one command-line argument holds 128 KB.
    for first in (0..ROWS).step_by(100) {
        let values: Vec<String> = (first..first + 100)
            .map(|id| format!("({id}, '{}')", text(id)))
            .collect();
        let insert = format!("INSERT INTO t VALUES {}", values.join(", "));
        query(p, Some("big"), &insert);
    }

    let all = query(p, Some("big"), "SELECT id, s FROM t");
    let mut ids: Vec<usize> = all
        .lines()
        .map(|l| {
            let (id, s) = l.split_once('\t').expect("two columns");
            let id = id.parse().expect("an id");
            assert_eq!(s, text(id));
            id
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..ROWS).collect::<Vec<_>>());
    // In the primary key's order, through its ordered index: streamed too.
    let ordered = query(p, Some("big"), "SELECT id FROM t WHERE id >= 0 ORDER BY id");
    assert_eq!(ordered.lines().count(), ROWS);

    let e = fails(p, Some("big"), "SELECT id, s FROM t ORDER BY s DESC", 1038);
    assert!(e.contains("hold more than"), "{e}");
    fails(p, Some("big"), "SELECT s, COUNT(*) FROM t GROUP BY s", 1038);
    assert!(sql.is_running(), "{}", sql.log());
    assert_eq!(
        query(p, Some("big"), "SELECT COUNT(*) FROM t"),
        format!("{ROWS}\n")
    );

    // With autocommit off, a streamed SELECT runs in the transaction it
    // opens: the EOF after its column definitions says so
    // (SERVER_STATUS_IN_TRANS), as the one after its rows does.
    let mut s = login(p);
    send_query(&mut s, "SET autocommit = 0");
    assert_eq!(read_packet(&mut s).1[0], 0x00, "an OK");
    send_query(&mut s, "SELECT id FROM big.t WHERE id = 1");
    assert_eq!(read_packet(&mut s).1, [1], "one column");
    read_packet(&mut s);
    let in_transaction = |eof: &[u8]| {
        assert_eq!((eof[0], eof.len()), (0xFE, 5), "an EOF packet");
        u16::from_le_bytes([eof[3], eof[4]]) & 0x0001 != 0
    };
    assert!(in_transaction(&read_packet(&mut s).1), "after the columns");
    assert_eq!(read_packet(&mut s).1, [1, b'1'], "the row");
    assert!(in_transaction(&read_packet(&mut s).1), "after the rows");
}
