//! The SQL node end to end: `shoal sql` as a process on a real cluster,
//! driven by the stock MariaDB command-line client (`mariadb`, installed
//! by the test command), and `shoal up` starting one by default.

mod common;

use common::sql_node::{fails, query, start_sql, stderr};
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
    query(p, None, "DROP DATABASE shop");
    fails(p, None, "USE shop", 1049);
}
