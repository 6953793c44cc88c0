//! The SQL node's executor over real processes on 127.0.0.1: sessions
//! (`shoal_sql::Session`, no wire) on a cluster of mgmd and a data node.
//! Covers connect chatter and variables, databases, CREATE TABLE with
//! every column kind and index kind, SHOW and DESCRIBE, INSERT / REPLACE /
//! UPDATE / DELETE / TRUNCATE, SELECT by primary key, IN list, unique key,
//! index range and full scan with pushed filters, ORDER BY / LIMIT,
//! index DDL, transactions (commit, rollback, autocommit off, a lock wait
//! timeout that ends the transaction, locks released at close), MySQL's
//! error codes, multi-statement strings, and tables shared with the native
//! API both ways.

mod common;

use common::sql_session::*;
use common::{runtime, TestCluster};
use shoal_client::{Cluster, ColumnDef, ColumnType, ExecType, LockMode, TableDef, Value};
use shoal_sql::{Handler, Outcome, SessionFactory};

#[test]
fn sql_statements_against_a_real_cluster() {
    let cluster = TestCluster::start_with(|c| c.deadlock_timeout_ms = 300);
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let factory = SessionFactory::new(native.clone());
        let mut s = factory.session("root", "127.0.0.1");

        // --- What connectors send at connect.
        ok(&mut s, "SET NAMES utf8mb4 COLLATE utf8mb4_0900_ai_ci").await;
        ok(&mut s, "SET autocommit=1").await;
        ok(&mut s, "SET @@session.autocommit = ON, sql_mode='STRICT_TRANS_TABLES'").await;
        ok(&mut s, "SET SESSION time_zone = '+00:00'").await;
        let chatter = rows(
            &mut s,
            "SELECT @@version, @@version_comment, @@session.autocommit, @@max_allowed_packet, @@sql_mode, DATABASE(), USER(), CONNECTION_ID(), 1+1",
        )
        .await;
        assert_eq!(chatter.len(), 1);
        let c = &chatter[0];
        assert!(c[0].as_deref().unwrap().contains("shoal"), "{c:?}");
        assert_eq!(c[2].as_deref(), Some("1"));
        assert_eq!(c[3].as_deref(), Some("67108864"));
        assert_eq!(c[4].as_deref(), Some("STRICT_TRANS_TABLES"));
        assert_eq!(c[5], None, "no database yet");
        assert_eq!(c[6].as_deref(), Some("root@127.0.0.1"));
        assert_eq!(c[8].as_deref(), Some("2"));
        if let Outcome::Rows { columns, .. } = ok(&mut s, "SELECT 1+1, @@version_comment LIMIT 1").await {
            assert_eq!(columns[0].name, "1+1", "a column is named by its text");
            assert_eq!(columns[1].name, "@@version_comment");
        }
        assert_eq!(column(&mut s, "SHOW VARIABLES LIKE 'auto%commit'").await, vec!["autocommit"]);
        assert!(rows(&mut s, "SHOW WARNINGS").await.is_empty());
        err_code(&mut s, "SELECT @@no_such_variable", 1193).await;
        err_code(&mut s, "SET @@session.version = 'x'", 1238).await;
        let e = err_code(&mut s, "SELEC 1", 1064).await;
        assert_eq!(&e.sqlstate, b"42000");

        // --- Databases.
        let dbs = column(&mut s, "SHOW DATABASES").await;
        for d in ["information_schema", "mysql", "shoal"] {
            assert!(dbs.contains(&d.to_string()), "{dbs:?}");
        }
        err_code(&mut s, "SHOW TABLES", 1046).await;
        assert_eq!(affected(&mut s, "CREATE DATABASE app").await, 1);
        err_code(&mut s, "CREATE DATABASE app", 1007).await;
        err_code(&mut s, "CREATE DATABASE shoal", 1007).await;
        ok(&mut s, "CREATE DATABASE IF NOT EXISTS app").await;
        err_code(&mut s, "USE nope", 1049).await;
        err_code(&mut s, "CREATE TABLE nope.t (id INT PRIMARY KEY)", 1049).await;
        err_code(&mut s, "DROP DATABASE nope", 1008).await;
        ok(&mut s, "DROP DATABASE IF EXISTS nope").await;
        ok(&mut s, "USE app").await;
        assert_eq!(column(&mut s, "SELECT DATABASE()").await, vec!["app"]);
        assert!(native.databases().await.unwrap().contains(&"app".to_string()));

        // --- CREATE TABLE and what SHOW says of it.
        ok(
            &mut s,
            "CREATE TABLE t1 (
                id INT NOT NULL,
                k INT NOT NULL DEFAULT 0,
                c VARCHAR(10),
                d DOUBLE,
                f FLOAT,
                ts TIMESTAMP NULL,
                dt DATETIME,
                b VARBINARY(8),
                u VARCHAR(20),
                big BIGINT UNSIGNED,
                tiny TINYINT,
                ch CHAR(4),
                note TEXT,
                PRIMARY KEY (id),
                UNIQUE KEY by_u (u),
                KEY by_k (k)
            ) ENGINE=ndbcluster COMMENT='NDB_TABLE=READ_BACKUP=1'",
        )
        .await;
        err_code(&mut s, "CREATE TABLE t1 (id INT PRIMARY KEY)", 1050).await;
        ok(&mut s, "CREATE TABLE IF NOT EXISTS t1 (id INT PRIMARY KEY)").await;
        err_code(&mut s, "CREATE TABLE nokey (a INT)", 1173).await;
        err_code(&mut s, "CREATE TABLE ts (id INT PRIMARY KEY, t TIMESTAMP DEFAULT CURRENT_TIMESTAMP)", 1235).await;
        err_code(&mut s, "CREATE TABLE two (a INT PRIMARY KEY, b INT, PRIMARY KEY (b))", 1068).await;
        err_code(&mut s, "CREATE TABLE bad (a INT PRIMARY KEY, KEY (zz))", 1072).await;
        err_code(&mut s, "CREATE TABLE dupcol (a INT PRIMARY KEY, A INT)", 1060).await;
        assert_eq!(column(&mut s, "SHOW TABLES").await, vec!["t1"]);
        assert_eq!(
            rows(&mut s, "SHOW FULL TABLES FROM app LIKE 't%'").await,
            vec![r(&["t1", "BASE TABLE"])]
        );
        let desc = rows(&mut s, "DESCRIBE t1").await;
        assert_eq!(desc[0], r(&["id", "int", "NO", "PRI", "NULL", ""]));
        assert_eq!(desc[1], r(&["k", "int", "NO", "MUL", "0", ""]));
        assert_eq!(desc[2], r(&["c", "varchar(10)", "YES", "", "NULL", ""]));
        assert_eq!(desc[8][3].as_deref(), Some("UNI"));
        assert_eq!(desc[9][1].as_deref(), Some("bigint unsigned"));
        assert_eq!(desc[11][1].as_deref(), Some("char(4)"));
        assert!(desc[12][1].as_deref().unwrap().starts_with("varchar("), "TEXT: {:?}", desc[12]);
        let full = rows(&mut s, "SHOW FULL COLUMNS FROM t1").await;
        assert_eq!(full[2][2].as_deref(), Some("utf8mb4_bin"));
        let create = rows(&mut s, "SHOW CREATE TABLE t1").await;
        let ddl = create[0][1].clone().unwrap();
        for part in ["UNIQUE KEY `by_u` (`u`)", "KEY `by_k` (`k`)", "PRIMARY KEY (`id`)", "READ_BACKUP=1", "`c` varchar(10) DEFAULT NULL"] {
            assert!(ddl.contains(part), "{part} in {ddl}");
        }
        let index = rows(&mut s, "SHOW INDEX FROM t1").await;
        let keys: Vec<&str> = index.iter().map(|r| r[2].as_deref().unwrap()).collect();
        assert_eq!(keys, vec!["PRIMARY", "by_u", "by_k"]);

        // New tables read from any replica unless the session says not
        // (NDB 8.0's ndb_read_backup); a table's comment overrides it.
        let on = rows(&mut s, "SELECT @@ndb_read_backup").await;
        assert_eq!(on[0][0].as_deref(), Some("1"));
        ok(&mut s, "CREATE TABLE rb_on (id INT PRIMARY KEY)").await;
        ok(&mut s, "CREATE TABLE rb_said_off (id INT PRIMARY KEY) COMMENT='NDB_TABLE=READ_BACKUP=0'").await;
        ok(&mut s, "SET ndb_read_backup = OFF").await;
        ok(&mut s, "CREATE TABLE rb_off (id INT PRIMARY KEY)").await;
        ok(&mut s, "CREATE TABLE rb_said (id INT PRIMARY KEY) COMMENT='NDB_TABLE=READ_BACKUP=1'").await;
        ok(&mut s, "SET ndb_read_backup = DEFAULT").await;
        // ON/OFF variables take what MariaDB takes: ON, OFF, TRUE, FALSE,
        // 1, 0; other numbers and words 1231, fractions 1232.
        for bad in ["2", "-1", "'yes'", "NULL"] {
            let e = err_code(&mut s, &format!("SET ndb_read_backup = {bad}"), 1231).await;
            assert!(e.message.contains("can't be set to the value of"), "{bad}: {}", e.message);
            err_code(&mut s, &format!("SET autocommit = {bad}"), 1231).await;
        }
        err_code(&mut s, "SET ndb_read_backup = 1.0", 1232).await;
        err_code(&mut s, "SET autocommit = 0.5", 1232).await;
        assert_eq!(rows(&mut s, "SELECT @@ndb_read_backup, @@autocommit").await[0], [Some("1".into()), Some("1".into())]);
        err_code(&mut s, "SET ndb_read_backup = X'01'", 1231).await;
        ok(&mut s, "SET ndb_read_backup = 0, autocommit = X'4F4E'").await;
        assert_eq!(rows(&mut s, "SELECT @@ndb_read_backup").await[0][0].as_deref(), Some("0"));
        ok(&mut s, "SET ndb_read_backup = 1").await;
        // SHOW CREATE TABLE says READ_BACKUP either way, so a dump replays
        // under the default as it was.
        for (t, on) in [("rb_on", true), ("rb_said_off", false), ("rb_off", false), ("rb_said", true)] {
            let ddl = rows(&mut s, &format!("SHOW CREATE TABLE {t}")).await[0][1].clone().unwrap();
            let want = if on { "COMMENT='NDB_TABLE=READ_BACKUP=1'" } else { "COMMENT='NDB_TABLE=READ_BACKUP=0'" };
            assert!(ddl.contains(want), "{t}: {ddl}");
            ok(&mut s, &format!("DROP TABLE {t}")).await;
        }

        // --- INSERT, and what SELECT returns of every type.
        assert_eq!(
            affected(
                &mut s,
                "INSERT INTO t1 (id, k, c, d, f, ts, dt, b, u, big, tiny, ch) VALUES
                 (1, 10, 'apple', 0.1, 1.5, '2024-01-02 03:04:05', '1999-12-31 23:59:59', x'00ff', 'u1', 18446744073709551615, -128, 'ab'),
                 (2, 20, 'banana', -2.5e20, NULL, NULL, NULL, NULL, 'u2', 0, 127, NULL),
                 (3, 30, NULL, 3, 0.25, NULL, NULL, 'xyz', NULL, NULL, NULL, 'abcd')",
            )
            .await,
            3
        );
        let all = rows(&mut s, "SELECT id, k, c, d, f, ts, dt, b, u, big, tiny, ch, note FROM t1 ORDER BY id").await;
        assert_eq!(
            all,
            vec![
                r(&["1", "10", "apple", "0.1", "1.5", "2024-01-02 03:04:05", "1999-12-31 23:59:59", "\u{0}\u{fffd}", "u1", "18446744073709551615", "-128", "ab", "NULL"]),
                r(&["2", "20", "banana", "-2.5e20", "NULL", "NULL", "NULL", "NULL", "u2", "0", "127", "NULL", "NULL"]),
                r(&["3", "30", "NULL", "3", "0.25", "NULL", "NULL", "xyz", "NULL", "NULL", "NULL", "abcd", "NULL"]),
            ]
        );
        // Defaults for columns left out.
        ok(&mut s, "INSERT INTO t1 (id) VALUES (4)").await;
        assert_eq!(column(&mut s, "SELECT k FROM t1 WHERE id = 4").await, vec!["0"]);
        ok(&mut s, "INSERT INTO t1 SET id = 5, k = 50, c = 'cherry', u = 'u5'").await;

        // --- Errors with MySQL's codes.
        let e = err_code(&mut s, "INSERT INTO t1 (id, k) VALUES (6, 1), (1, 2)", 1062).await;
        assert_eq!(e.message, "Duplicate entry '1' for key 'PRIMARY'");
        assert_eq!(&e.sqlstate, b"23000");
        assert!(rows(&mut s, "SELECT * FROM t1 WHERE id = 6").await.is_empty(), "the statement left nothing");
        let e = err_code(&mut s, "INSERT INTO t1 (id, u) VALUES (7, 'u2')", 1062).await;
        assert_eq!(e.message, "Duplicate entry 'u2' for key 'by_u'");
        assert_eq!(affected(&mut s, "INSERT IGNORE INTO t1 (id) VALUES (1), (8)").await, 1);
        err_code(&mut s, "INSERT INTO t1 (id, tiny) VALUES (9, 300)", 1264).await;
        err_code(&mut s, "INSERT INTO t1 (id, big) VALUES (9, -1)", 1264).await;
        let e = err_code(&mut s, "INSERT INTO t1 (id, k) VALUES (9, NULL)", 1048).await;
        assert_eq!(e.message, "Column 'k' cannot be null");
        let e = err_code(&mut s, "INSERT INTO t1 (id, c) VALUES (9, 'elevenchars')", 1406).await;
        assert_eq!(&e.sqlstate, b"22001");
        ok(&mut s, "INSERT INTO t1 (id, c) VALUES (9, 'éééééééééé')").await;
        err_code(&mut s, "INSERT INTO t1 (id, k) VALUES (10, 'abc')", 1366).await;
        err_code(&mut s, "INSERT INTO t1 (id, ts) VALUES (10, 'yesterday')", 1292).await;
        let e = err_code(&mut s, "INSERT INTO t1 (id, nope) VALUES (10, 1)", 1054).await;
        assert_eq!(&e.sqlstate, b"42S22");
        err_code(&mut s, "INSERT INTO t1 (id, k) VALUES (10)", 1136).await;
        let e = err_code(&mut s, "SELECT * FROM missing", 1146).await;
        assert_eq!(e.message, "Table 'app.missing' doesn't exist");
        err_code(&mut s, "SELECT nope FROM t1", 1054).await;
        err_code(&mut s, "SELECT * FROM t1 WHERE nope = 1", 1054).await;
        err_code(&mut s, "SELECT GROUP_CONCAT(id) FROM t1", 1235).await;
        err_code(&mut s, "SELECT * FROM t1 RIGHT JOIN t1 AS x ON t1.id = x.id", 1235).await;
        err_code(&mut s, "SELECT id FROM t1 GROUP BY id WITH ROLLUP", 1235).await;

        // --- SELECT by every access path.
        assert_eq!(column(&mut s, "SELECT c FROM t1 WHERE id = 2").await, vec!["banana"]);
        assert_eq!(column(&mut s, "SELECT c FROM t1 WHERE id = '2'").await, vec!["banana"]);
        let mut by_in = column(&mut s, "SELECT id FROM t1 WHERE id IN (3, 1, 99, NULL)").await;
        by_in.sort();
        assert_eq!(by_in, vec!["1", "3"]);
        assert!(column(&mut s, "SELECT id FROM t1 WHERE id = 1 AND k = 11").await.is_empty(), "re-checked");
        assert_eq!(column(&mut s, "SELECT id FROM t1 WHERE u = 'u5'").await, vec!["5"]);
        assert_eq!(
            column(&mut s, "SELECT id FROM t1 WHERE k BETWEEN 15 AND 35 ORDER BY k").await,
            vec!["2", "3"]
        );
        assert_eq!(
            column(&mut s, "SELECT id FROM t1 WHERE k > 10 ORDER BY k DESC LIMIT 2").await,
            vec!["5", "3"]
        );
        assert_eq!(column(&mut s, "SELECT id FROM t1 ORDER BY k DESC LIMIT 1, 2").await, vec!["3", "2"]);
        assert_eq!(
            column(&mut s, "SELECT id FROM t1 WHERE c LIKE '%an%' OR c IS NULL ORDER BY id").await,
            vec!["2", "3", "4", "8"]
        );
        assert_eq!(
            column(&mut s, "SELECT id FROM t1 WHERE NOT (k >= 20) AND c IS NOT NULL ORDER BY 1").await,
            vec!["1", "9"]
        );
        assert_eq!(
            column(&mut s, "SELECT id FROM t1 WHERE k % 20 = 10 ORDER BY id").await,
            vec!["1", "3", "5"],
            "evaluated in the SQL node"
        );
        assert_eq!(
            rows(&mut s, "SELECT id, k * 2 AS kk, CONCAT(c, '!') FROM t1 WHERE id <= 2 ORDER BY kk DESC").await,
            vec![r(&["2", "40", "banana!"]), r(&["1", "20", "apple!"])]
        );
        assert_eq!(
            column(&mut s, "SELECT id FROM t1 WHERE ts = '2024-01-02 03:04:05'").await,
            vec!["1"]
        );
        assert_eq!(column(&mut s, "SELECT id FROM t1 WHERE b = x'00ff'").await, vec!["1"]);
        assert_eq!(column(&mut s, "SELECT app.t1.id FROM app.t1 WHERE t1.id = 3").await, vec!["3"]);
        assert_eq!(column(&mut s, "SELECT x.id FROM t1 AS x WHERE x.id = 3").await, vec!["3"]);
        assert_eq!(column(&mut s, "SELECT id FROM t1 WHERE id = 1 LOCK IN SHARE MODE").await, vec!["1"]);
        assert_eq!(column(&mut s, "SELECT id FROM t1 WHERE k = 20 FOR UPDATE").await, vec!["2"]);
        assert_eq!(column(&mut s, "SELECT id FROM t1 WHERE c = 'apple' FOR SHARE").await, vec!["1"]);

        // --- What a prepare answers, and parameters spliced as the
        // protocol splices them (strings with quotes as X'...').
        let described = s.prepare("SELECT id, c AS name, k + ? FROM t1 WHERE id = ?").await.unwrap();
        let names: Vec<&str> = described.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["id", "name", "k + ?"]);
        assert!(described[0].primary_key && !described[0].nullable);
        assert_eq!(s.prepare("SELECT * FROM missing WHERE id = ?").await.unwrap_err().code, 1146);
        assert_eq!(s.prepare("SELECT ?, 1").await.unwrap().len(), 2);
        assert!(s.prepare("INSERT INTO t1 (id) VALUES (?)").await.unwrap().is_empty());
        assert_eq!(s.prepare("SHOW TABLES").await.unwrap().len(), 1);
        assert_eq!(column(&mut s, "SELECT id FROM t1 WHERE c = X'6170706C65'").await, vec!["1"]);
        assert_eq!(column(&mut s, "SELECT id FROM t1 WHERE u = X'7535'").await, vec!["5"]);

        // --- UPDATE, DELETE, REPLACE.
        let upd = ok(&mut s, "UPDATE t1 SET c = 'APPLE' WHERE id = 1").await;
        assert!(matches!(&upd, Outcome::Ok { affected_rows: 1, info, .. } if info.contains("Rows matched: 1")), "{upd:?}");
        assert_eq!(affected(&mut s, "UPDATE t1 SET c = 'none' WHERE id = 99").await, 0);
        assert_eq!(affected(&mut s, "UPDATE t1 SET k = k + 1 WHERE id IN (1, 2)").await, 2);
        assert_eq!(column(&mut s, "SELECT k FROM t1 WHERE id = 2").await, vec!["21"]);
        assert_eq!(affected(&mut s, "UPDATE t1 SET k = k WHERE id = 2").await, 0, "matched, not changed");
        assert_eq!(affected(&mut s, "UPDATE t1 SET d = 7 WHERE c LIKE 'b%'").await, 1);
        assert_eq!(column(&mut s, "SELECT d FROM t1 WHERE id = 2").await, vec!["7"]);
        err_code(&mut s, "UPDATE t1 SET u = 'u1' WHERE id = 2", 1062).await;
        err_code(&mut s, "UPDATE t1 SET tiny = 1000 WHERE id = 2", 1264).await;
        assert_eq!(affected(&mut s, "UPDATE t1 SET id = 20 WHERE id = 2").await, 1, "a new key");
        assert_eq!(column(&mut s, "SELECT c FROM t1 WHERE id = 20").await, vec!["banana"]);
        assert!(column(&mut s, "SELECT c FROM t1 WHERE id = 2").await.is_empty());
        assert_eq!(affected(&mut s, "REPLACE INTO t1 (id, k) VALUES (20, 1), (21, 2)").await, 3);
        assert_eq!(column(&mut s, "SELECT c FROM t1 WHERE id = 20").await, vec!["NULL"]);
        assert_eq!(affected(&mut s, "DELETE FROM t1 WHERE id = 21").await, 1);
        assert_eq!(affected(&mut s, "DELETE FROM t1 WHERE id = 21").await, 0);
        assert_eq!(affected(&mut s, "DELETE FROM t1 WHERE k < 5 ORDER BY id LIMIT 1").await, 1);
        assert_eq!(column(&mut s, "SELECT id FROM t1 WHERE k < 5 ORDER BY id").await, vec!["8", "9", "20"]);
        assert_eq!(affected(&mut s, "DELETE FROM t1 WHERE c IS NULL AND k < 5").await, 2);
        assert_eq!(
            column(&mut s, "SELECT id FROM t1 ORDER BY id").await,
            vec!["1", "3", "5", "9"]
        );

        // --- A table made by SQL, seen by the native API.
        let t1 = native.table("app.t1").await.unwrap();
        let rec = t1.record(&["id", "c", "k"]).unwrap();
        let mut tx = native.transaction();
        let read = tx.read(&rec, &[Value::Int(1)], LockMode::CommittedRead).unwrap();
        tx.execute(ExecType::Commit).await.unwrap();
        let row = tx.row(read).unwrap();
        assert_eq!(row.get("c"), Some(Value::Str("APPLE".into())));
        assert_eq!(row.get("k"), Some(Value::Int(11)));
        let mut tx = native.transaction();
        tx.insert(&rec, &[Value::Int(30), Value::Str("native".into()), Value::Int(3)]).unwrap();
        tx.execute(ExecType::Commit).await.unwrap();
        assert_eq!(column(&mut s, "SELECT c FROM t1 WHERE id = 30").await, vec!["native"]);

        // --- And a native table, seen by SQL in database `shoal`.
        native
            .create_table(
                TableDef::new(
                    "natives",
                    vec![
                        ColumnDef::new("id", ColumnType::BigInt { unsigned: true }),
                        ColumnDef::new("name", ColumnType::VarChar(12)).nullable(),
                    ],
                    &["id"],
                )
                .unwrap(),
            )
            .await
            .unwrap();
        let nat = native.table("natives").await.unwrap();
        let mut tx = native.transaction();
        tx.insert(&nat.full_record(), &[Value::UInt(1), Value::Str("one".into())]).unwrap();
        tx.execute(ExecType::Commit).await.unwrap();
        assert_eq!(column(&mut s, "SELECT name FROM shoal.natives WHERE id = 1").await, vec!["one"]);
        assert!(!column(&mut s, "SHOW TABLES FROM app").await.contains(&"natives".to_string()));
        ok(&mut s, "USE shoal").await;
        assert!(column(&mut s, "SHOW TABLES").await.contains(&"natives".to_string()));
        ok(&mut s, "INSERT INTO natives VALUES (2, 'two')").await;
        ok(&mut s, "USE app").await;

        // --- Transactions.
        ok(&mut s, "BEGIN").await;
        assert!(s.status().in_transaction);
        ok(&mut s, "INSERT INTO t1 (id, k) VALUES (40, 1)").await;
        ok(&mut s, "UPDATE t1 SET k = 99 WHERE id = 1").await;
        assert_eq!(column(&mut s, "SELECT k FROM t1 WHERE id = 40").await, vec!["1"], "own write by key");
        ok(&mut s, "ROLLBACK").await;
        assert!(!s.status().in_transaction);
        assert!(column(&mut s, "SELECT id FROM t1 WHERE id = 40").await.is_empty());
        assert_eq!(column(&mut s, "SELECT k FROM t1 WHERE id = 1").await, vec!["11"]);
        ok(&mut s, "START TRANSACTION; INSERT INTO t1 (id, k) VALUES (41, 1); COMMIT").await;
        assert_eq!(column(&mut s, "SELECT id FROM t1 WHERE id = 41").await, vec!["41"]);
        ok(&mut s, "SET autocommit = 0").await;
        assert!(!s.status().autocommit && !s.status().in_transaction);
        ok(&mut s, "INSERT INTO t1 (id, k) VALUES (42, 1)").await;
        assert!(s.status().in_transaction, "an implicit transaction");
        ok(&mut s, "ROLLBACK").await;
        ok(&mut s, "INSERT INTO t1 (id, k) VALUES (43, 1)").await;
        ok(&mut s, "SET autocommit = 1").await;
        assert!(!s.status().in_transaction, "switching autocommit on commits");
        assert_eq!(column(&mut s, "SELECT id FROM t1 WHERE id IN (42, 43)").await, vec!["43"]);

        // A lock wait that times out (1205) ends the waiter's transaction.
        let mut other = factory.session("root", "127.0.0.1");
        ok(&mut other, "USE app").await;
        ok(&mut s, "BEGIN").await;
        assert_eq!(column(&mut s, "SELECT k FROM t1 WHERE id = 1 FOR UPDATE").await, vec!["11"]);
        ok(&mut other, "BEGIN").await;
        ok(&mut other, "INSERT INTO t1 (id, k) VALUES (44, 1)").await;
        let e = err_code(&mut other, "UPDATE t1 SET k = 5 WHERE id = 1", 1205).await;
        assert_eq!(&e.sqlstate, b"HY000");
        assert!(!other.status().in_transaction, "Shoal rolled it back");
        assert!(column(&mut other, "SELECT id FROM t1 WHERE id = 44").await.is_empty(), "the insert went with it");
        // A plain SELECT reads the committed row without waiting.
        assert_eq!(column(&mut other, "SELECT k FROM t1 WHERE id = 1").await, vec!["11"]);
        // An error of the SQL node's own leaves a transaction open.
        err_code(&mut s, "SELECT nope FROM t1", 1054).await;
        assert!(s.status().in_transaction);
        ok(&mut s, "UPDATE t1 SET k = 12 WHERE id = 1").await;
        // Closing the session rolls back and frees the lock.
        s.close().await;
        assert_eq!(affected(&mut other, "UPDATE t1 SET k = 13 WHERE id = 1").await, 1);
        let mut s = factory.session("root", "127.0.0.1");
        ok(&mut s, "USE app").await;
        assert_eq!(column(&mut s, "SELECT k FROM t1 WHERE id = 1").await, vec!["13"]);
        // A locking scan (non-key WHERE) in a transaction, then a writer
        // of one of its rows waits and times out.
        ok(&mut s, "BEGIN").await;
        assert_eq!(
            column(&mut s, "SELECT id FROM t1 WHERE c = 'cherry' FOR UPDATE").await,
            vec!["5"]
        );
        err_code(&mut other, "DELETE FROM t1 WHERE id = 5", 1205).await;
        ok(&mut s, "COMMIT").await;
        assert_eq!(affected(&mut other, "DELETE FROM t1 WHERE id = 5").await, 1);

        // --- Index DDL.
        ok(&mut s, "CREATE INDEX by_c ON t1 (c)").await;
        err_code(&mut s, "CREATE INDEX by_c ON t1 (d)", 1061).await;
        ok(&mut s, "ALTER TABLE t1 ADD INDEX by_d (d), ADD UNIQUE KEY by_tiny (tiny)").await;
        assert_eq!(column(&mut s, "SELECT id FROM t1 WHERE c = 'APPLE'").await, vec!["1"]);
        assert_eq!(column(&mut s, "SELECT id FROM t1 WHERE tiny = -128").await, vec!["1"]);
        ok(&mut s, "INSERT INTO t1 (id, k) VALUES (50, 1), (51, 1)").await;
        let e = err_code(&mut s, "CREATE UNIQUE INDEX by_k_unique ON t1 (k)", 1062).await;
        assert!(e.message.contains("by_k_unique"), "{e}");
        ok(&mut s, "DROP INDEX by_c ON t1").await;
        ok(&mut s, "ALTER TABLE t1 DROP INDEX by_d, DROP KEY by_tiny").await;
        err_code(&mut s, "DROP INDEX by_c ON t1", 1091).await;
        let e = err_code(&mut s, "ALTER TABLE t1 REORGANIZE PARTITION", 1235).await;
        assert!(e.message.contains("REORGANIZE"), "{e}");
        err_code(&mut s, "ALTER TABLE t1 ADD COLUMN z INT", 1235).await;
        let keys = column(&mut s, "SHOW INDEX FROM t1").await;
        assert_eq!(keys.len(), 3, "{keys:?}");

        // --- Multi-statement strings stop at the first error.
        let results = run(&mut s, "INSERT INTO t1 (id) VALUES (60); SELECT id FROM t1 WHERE id = 60; SELEC 1; INSERT INTO t1 (id) VALUES (61)").await;
        assert_eq!(results.len(), 3, "{results:?}");
        assert!(results[0].is_ok() && results[1].is_ok());
        assert_eq!(results[2].as_ref().unwrap_err().code, 1064);
        assert!(column(&mut s, "SELECT id FROM t1 WHERE id = 61").await.is_empty());
        assert_eq!(err(&mut s, " ; ").await.code, 1065);

        // --- TRUNCATE, DROP TABLE, DROP DATABASE.
        ok(&mut s, "TRUNCATE TABLE t1").await;
        assert!(column(&mut s, "SELECT id FROM t1").await.is_empty());
        ok(&mut s, "CREATE TABLE t2 (a CHAR(3) PRIMARY KEY, n SMALLINT UNSIGNED) PARTITION BY KEY (a) PARTITIONS 3").await;
        assert_eq!(native.table("app.t2").await.unwrap().def().options.fragment_count, Some(3));
        ok(&mut s, "INSERT INTO t2 VALUES ('x', 1)").await;
        ok(&mut s, "DROP TABLE t1").await;
        err_code(&mut s, "DROP TABLE t1", 1051).await;
        ok(&mut s, "DROP TABLE IF EXISTS t1").await;
        assert_eq!(affected(&mut s, "DROP DATABASE app").await, 1, "with its one table");
        assert_eq!(column(&mut s, "SELECT DATABASE()").await, vec!["NULL"]);
        assert!(native.table("app.t2").await.is_err());
        assert!(!column(&mut s, "SHOW DATABASES").await.contains(&"app".to_string()));
    });
}

/// A row of the model table: `k`, `s`, `u` (all nullable).
type ModelRow = (Option<i64>, Option<&'static str>, Option<i64>);

/// A predicate as SQL text and as the model evaluates it (three-valued:
/// `None` is UNKNOWN).
type Pred = (String, Box<dyn Fn(i64, &ModelRow) -> Option<bool>>);

const STRINGS: [Option<&str>; 5] = [Some("a"), Some("ab"), Some("b"), Some("ba"), None];

fn cmp(a: Option<i64>, f: impl Fn(i64) -> bool) -> Option<bool> {
    a.map(f)
}

fn predicate(rng: &mut Rng) -> Pred {
    let c = rng.below(10);
    let c2 = c + rng.below(5);
    match rng.below(13) {
        0 => {
            let id = rng.below(60);
            (format!("id = {id}"), Box::new(move |i, _| Some(i == id)))
        }
        1 => {
            // Up to 7 keys: past the key lookup limit (4) it scans.
            let ids: Vec<i64> = (0..1 + rng.below(7)).map(|_| rng.below(60)).collect();
            let list = ids
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            (
                format!("id IN ({list})"),
                Box::new(move |i, _| Some(ids.contains(&i))),
            )
        }
        2 => (
            format!("k = {c}"),
            Box::new(move |_, r| cmp(r.0, |k| k == c)),
        ),
        3 => (
            format!("k BETWEEN {c} AND {c2}"),
            Box::new(move |_, r| cmp(r.0, |k| k >= c && k <= c2)),
        ),
        4 => (
            format!("k > {c}"),
            Box::new(move |_, r| cmp(r.0, |k| k > c)),
        ),
        5 => (
            format!("k >= {c} AND s LIKE 'a%'"),
            Box::new(move |_, r| {
                let a = cmp(r.0, |k| k >= c);
                let b = r.1.map(|s| s.starts_with('a'));
                match (a, b) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                }
            }),
        ),
        6 => {
            let u = rng.below(40);
            (
                format!("u = {u}"),
                Box::new(move |_, r| cmp(r.2, |x| x == u)),
            )
        }
        7 => ("s IS NULL".into(), Box::new(|_, r| Some(r.1.is_none()))),
        8 => (
            format!("NOT (k < {c})"),
            Box::new(move |_, r| cmp(r.0, |k| k >= c)),
        ),
        9 => {
            let s = STRINGS[rng.below(4) as usize].unwrap();
            (
                format!("k = {c} AND s = '{s}'"),
                Box::new(move |_, r| {
                    let a = cmp(r.0, |k| k == c);
                    let b = r.1.map(|x| x == s);
                    match (a, b) {
                        (Some(false), _) | (_, Some(false)) => Some(false),
                        (Some(true), Some(true)) => Some(true),
                        _ => None,
                    }
                }),
            )
        }
        10 => {
            let id = rng.below(60);
            (
                format!("(k < {c} OR id > {id})"),
                Box::new(move |i, r| match (cmp(r.0, |k| k < c), i > id) {
                    (_, true) | (Some(true), _) => Some(true),
                    (Some(false), false) => Some(false),
                    (None, false) => None,
                }),
            )
        }
        11 => (
            "k IS NOT NULL AND k % 3 = 1".into(),
            Box::new(|_, r| Some(r.0.is_some_and(|k| k % 3 == 1))),
        ),
        _ => (
            format!("s IN ('a', 'ba') OR u <= {c}"),
            Box::new(move |_, r| {
                let a = r.1.map(|s| s == "a" || s == "ba");
                let b = cmp(r.2, |u| u <= c);
                match (a, b) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                }
            }),
        ),
    }
}

/// Random writes and reads through every access path, at tiny limits
/// (batches of 3 operations, at most 4 key lookups a statement), checked
/// against a model of the table after every statement.
#[test]
fn sql_results_agree_with_a_model_at_tiny_limits() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let limits = shoal_sql::exec::Limits {
            result_bytes_max: 1 << 20,
            rows_max: 10_000,
            group_bytes_max: 1 << 20,
            key_lookups_max: 4,
            batch_ops_max: 3,
            join_tables_max: 61,
            held_bytes_max: 256 << 20,
        };
        let mut s = SessionFactory::new(native.clone())
            .with_limits(limits)
            .session("root", "127.0.0.1");
        ok(&mut s, "CREATE DATABASE m; USE m").await;
        ok(
            &mut s,
            "CREATE TABLE t (id INT PRIMARY KEY, k INT, s VARCHAR(4), u INT,
                UNIQUE KEY by_u (u), KEY by_k (k), KEY by_ks (k, s))",
        )
        .await;
        let mut model: std::collections::BTreeMap<i64, ModelRow> = Default::default();
        let mut rng = Rng(0x5EED_1234_ABCD_0001);
        for step in 0..400 {
            match rng.below(10) {
                0..=2 => {
                    let n = 1 + rng.below(5);
                    let rows: Vec<(i64, ModelRow)> = (0..n)
                        .map(|_| {
                            let k = (rng.below(8) > 0).then(|| rng.below(10));
                            let u = (rng.below(3) > 0).then(|| rng.below(40));
                            (rng.below(60), (k, STRINGS[rng.below(5) as usize], u))
                        })
                        .collect();
                    let values: Vec<String> = rows
                        .iter()
                        .map(|(id, (k, st, u))| {
                            let st = st.map_or("NULL".into(), |x| format!("'{x}'"));
                            format!("({id}, {}, {st}, {})", sql_opt(*k), sql_opt(*u))
                        })
                        .collect();
                    let sql = format!("INSERT INTO t (id, k, s, u) VALUES {}", values.join(", "));
                    // It fails whole if a key or a unique value repeats.
                    let mut ids: Vec<i64> = model.keys().copied().collect();
                    let mut us: Vec<i64> = model.values().filter_map(|r| r.2).collect();
                    let mut clash = false;
                    for (id, (_, _, u)) in &rows {
                        clash |= ids.contains(id) || u.is_some_and(|u| us.contains(&u));
                        ids.push(*id);
                        us.extend(*u);
                    }
                    if clash {
                        err_code(&mut s, &sql, 1062).await;
                    } else {
                        assert_eq!(affected(&mut s, &sql).await, n as u64, "{sql}");
                        model.extend(rows);
                    }
                }
                3 | 4 => {
                    let (text, holds) = predicate(&mut rng);
                    let d = 1 + rng.below(3);
                    let sql = format!("UPDATE t SET k = k + {d} WHERE {text}");
                    let mut changed = 0;
                    for (&id, row) in model.iter_mut() {
                        if holds(id, row) == Some(true) {
                            if let Some(k) = row.0 {
                                row.0 = Some(k + d);
                                changed += 1;
                            }
                        }
                    }
                    assert_eq!(affected(&mut s, &sql).await, changed, "step {step}: {sql}");
                }
                5 => {
                    let (text, holds) = predicate(&mut rng);
                    let sql = format!("DELETE FROM t WHERE {text}");
                    let before = model.len();
                    model.retain(|&id, row| holds(id, row) != Some(true));
                    let gone = (before - model.len()) as u64;
                    assert_eq!(affected(&mut s, &sql).await, gone, "step {step}: {sql}");
                }
                _ => {
                    let (text, holds) = predicate(&mut rng);
                    let sql = format!("SELECT id, k, s, u FROM t WHERE {text} ORDER BY id");
                    let want: Rows = model
                        .iter()
                        .filter(|(&id, row)| holds(id, row) == Some(true))
                        .map(|(id, (k, st, u))| {
                            vec![
                                Some(id.to_string()),
                                k.map(|k| k.to_string()),
                                st.map(str::to_string),
                                u.map(|u| u.to_string()),
                            ]
                        })
                        .collect();
                    assert_eq!(rows(&mut s, &sql).await, want, "step {step}: {sql}");
                }
            }
        }
        let everything: Vec<String> = model.keys().map(i64::to_string).collect();
        assert_eq!(
            column(&mut s, "SELECT id FROM t ORDER BY id").await,
            everything
        );
        // A plain SELECT streams its rows: no limit on what a statement may
        // hold stops it. A sort no index serves holds its rows, bounded by
        // rows_max and held_bytes_max; a grouping's result by
        // result_bytes_max: 1038 past them.
        ok(&mut s, "DELETE FROM t WHERE id >= 0").await;
        ok(
            &mut s,
            "INSERT INTO t (id, k) VALUES (1000, 1), (1001, 2), (1002, 3), (1003, 4)",
        )
        .await;
        for (small, held) in [
            (
                shoal_sql::exec::Limits {
                    result_bytes_max: 8,
                    ..limits
                },
                "SELECT k, COUNT(*) FROM t GROUP BY k",
            ),
            (
                shoal_sql::exec::Limits {
                    rows_max: 3,
                    ..limits
                },
                "SELECT id, k FROM t WHERE k > 0 ORDER BY k + 0",
            ),
            (
                shoal_sql::exec::Limits {
                    held_bytes_max: 64,
                    ..limits
                },
                "SELECT id, k FROM t WHERE k > 0 ORDER BY k + 0",
            ),
        ] {
            let mut tiny = SessionFactory::new(native.clone())
                .with_limits(small)
                .session("root", "127.0.0.1");
            ok(&mut tiny, "USE m").await;
            let e = err_code(&mut tiny, held, 1038).await;
            assert!(
                e.message.contains("limit") || e.message.contains("rows"),
                "{e}"
            );
            for streamed in [
                "SELECT id, k FROM t WHERE k > 0",
                "SELECT * FROM t",
                "SELECT id FROM t WHERE k > 0 ORDER BY k",
            ] {
                assert_eq!(rows(&mut tiny, streamed).await.len(), 4, "{streamed}");
            }
            // An index that serves the ORDER BY stops the scan at the LIMIT.
            assert_eq!(
                column(
                    &mut tiny,
                    "SELECT id FROM t WHERE k > 0 ORDER BY k LIMIT 2 OFFSET 1"
                )
                .await,
                vec!["1001", "1002"]
            );
        }
        ok(&mut s, "DROP DATABASE m").await;
    });
}

/// INSERT IGNORE skips rows whose unique-index values another row holds
/// (already stored, or taken by an earlier row of the statement), keeps
/// rows with NULL in the index, and still skips primary-key duplicates; a
/// plain INSERT of such a row fails with 1062 and changes nothing.
#[test]
fn insert_ignore_skips_unique_index_clashes() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let factory = SessionFactory::new(native.clone());
        let mut s = factory.session("root", "127.0.0.1");
        ok(&mut s, "CREATE DATABASE ig; USE ig").await;
        ok(
            &mut s,
            "CREATE TABLE t (id INT PRIMARY KEY, u INT, v VARCHAR(10), UNIQUE KEY (u), UNIQUE KEY uv (v, u))",
        )
        .await;
        ok(&mut s, "INSERT INTO t VALUES (1, 5, 'a')").await;
        err_code(&mut s, "INSERT INTO t VALUES (2, 5, 'b')", 1062).await;
        assert_eq!(
            affected(
                &mut s,
                "INSERT IGNORE INTO t VALUES (2, 5, 'b'), (3, 6, 'c'), (4, 6, 'd'), (1, 7, 'e'), (5, NULL, 'f'), (6, NULL, 'f')",
            )
            .await,
            3
        );
        assert_eq!(
            rows(&mut s, "SELECT id, u, v FROM t ORDER BY id").await,
            vec![
                r(&["1", "5", "a"]),
                r(&["3", "6", "c"]),
                r(&["5", "NULL", "f"]),
                r(&["6", "NULL", "f"]),
            ]
        );
        // In a transaction the skipped rows leave it usable.
        ok(&mut s, "BEGIN").await;
        assert_eq!(affected(&mut s, "INSERT IGNORE INTO t VALUES (7, 5, 'z')").await, 0);
        assert_eq!(affected(&mut s, "INSERT IGNORE INTO t VALUES (7, 8, 'z')").await, 1);
        ok(&mut s, "COMMIT").await;
        assert_eq!(
            column(&mut s, "SELECT id FROM t WHERE u = 8").await,
            vec!["7".to_string()]
        );
    });
}

/// REPLACE deletes every other row holding the new row's primary key or
/// one of its unique values before it writes it (affected rows count both,
/// as in MySQL), within one statement too.
#[test]
fn replace_deletes_rows_clashing_on_unique_indexes() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let factory = SessionFactory::new(native.clone());
        let mut s = factory.session("root", "127.0.0.1");
        ok(&mut s, "CREATE DATABASE rp; USE rp").await;
        ok(
            &mut s,
            "CREATE TABLE t (id INT PRIMARY KEY, u INT, w INT, UNIQUE KEY (u), UNIQUE KEY (w))",
        )
        .await;
        ok(
            &mut s,
            "INSERT INTO t VALUES (1, 10, 100), (2, 20, 200), (3, 30, NULL)",
        )
        .await;
        // Clashes with row 1 on u and row 2 on w: both go, the new row in.
        assert_eq!(
            affected(&mut s, "REPLACE INTO t VALUES (4, 10, 200)").await,
            3
        );
        // Its own key and another's unique value: 1 + 1 deleted, 1 in.
        assert_eq!(
            affected(&mut s, "REPLACE INTO t VALUES (3, 10, 300)").await,
            3
        );
        // No clash at all.
        assert_eq!(
            affected(&mut s, "REPLACE INTO t VALUES (5, NULL, NULL)").await,
            1
        );
        // Rows of one statement replace each other in order.
        assert_eq!(
            affected(&mut s, "REPLACE INTO t VALUES (6, 60, 600), (7, 60, 700)").await,
            3
        );
        assert_eq!(
            rows(&mut s, "SELECT id, u, w FROM t ORDER BY id").await,
            vec![
                r(&["3", "10", "300"]),
                r(&["5", "NULL", "NULL"]),
                r(&["7", "60", "700"]),
            ]
        );
    });
}

/// INSERT ... ON DUPLICATE KEY UPDATE: a clash on the primary key or a
/// unique index updates the existing row (VALUES(), a row alias, column
/// aliases, assignments seeing earlier ones), rows of one statement see
/// each other, affected rows count 1 / 2 / 0 as MySQL does; and
/// INSERT ... SELECT, from another table, from itself and from a
/// grouping SELECT.
#[test]
fn insert_select_and_on_duplicate_key_update() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let factory = SessionFactory::new(native.clone());
        let mut s = factory.session("root", "127.0.0.1");
        ok(&mut s, "CREATE DATABASE up; USE up").await;
        ok(
            &mut s,
            "CREATE TABLE c (id INT PRIMARY KEY, name VARCHAR(20), n INT NOT NULL DEFAULT 0, UNIQUE KEY (name))",
        )
        .await;
        // New rows: 1 each.
        assert_eq!(
            affected(
                &mut s,
                "INSERT INTO c VALUES (1, 'a', 1), (2, 'b', 1) ON DUPLICATE KEY UPDATE n = n + 1"
            )
            .await,
            2
        );
        // A primary-key clash updates: 2.
        assert_eq!(
            affected(&mut s, "INSERT INTO c VALUES (1, 'x', 5) ON DUPLICATE KEY UPDATE n = n + VALUES(n)").await,
            2
        );
        // A unique-index clash updates the row holding the value.
        assert_eq!(
            affected(&mut s, "INSERT INTO c (id, name, n) VALUES (9, 'b', 7) ON DUPLICATE KEY UPDATE n = VALUES(n) * 10").await,
            2
        );
        // Nothing changes: 0.
        assert_eq!(
            affected(&mut s, "INSERT INTO c VALUES (2, 'b', 1) ON DUPLICATE KEY UPDATE n = n").await,
            0
        );
        assert_eq!(
            rows(&mut s, "SELECT id, name, n FROM c ORDER BY id").await,
            vec![r(&["1", "a", "6"]), r(&["2", "b", "70"])]
        );
        // Rows of one statement see each other; assignments see earlier
        // ones; a row alias and column aliases name the inserted row.
        assert_eq!(
            affected(
                &mut s,
                "INSERT INTO c VALUES (3, 'c', 1), (3, 'c', 2) AS new ON DUPLICATE KEY UPDATE n = c.n + new.n, name = CONCAT(name, n)"
            )
            .await,
            3
        );
        assert_eq!(
            rows(&mut s, "SELECT name, n FROM c WHERE id = 3").await,
            vec![r(&["c3", "3"])]
        );
        assert_eq!(
            affected(
                &mut s,
                "INSERT INTO c (id, name, n) VALUES (3, 'z', 4) AS v(i, nm, k) ON DUPLICATE KEY UPDATE n = k + 1, name = nm"
            )
            .await,
            2
        );
        assert_eq!(
            rows(&mut s, "SELECT name, n FROM c WHERE id = 3").await,
            vec![r(&["z", "5"])]
        );
        // Updating into another row's unique value is a 1062; a new
        // primary key moves the row.
        err_code(&mut s, "INSERT INTO c VALUES (1, 'q', 0) ON DUPLICATE KEY UPDATE name = 'b'", 1062).await;
        assert_eq!(
            affected(&mut s, "INSERT INTO c VALUES (1, 'q', 0) ON DUPLICATE KEY UPDATE id = 10").await,
            2
        );
        assert_eq!(
            column(&mut s, "SELECT id FROM c ORDER BY id").await,
            vec!["2", "3", "10"]
        );
        err_code(&mut s, "INSERT INTO c VALUES (2, 'b', 0) ON DUPLICATE KEY UPDATE nope = 1", 1054).await;
        err_code(&mut s, "INSERT INTO c VALUES (2, 'b', 0) ON DUPLICATE KEY UPDATE n = VALUES(nope)", 1054).await;
        err_code(&mut s, "INSERT INTO c VALUES (2, 'b', 0) ON DUPLICATE KEY UPDATE n = NULL", 1048).await;
        // In a rolled-back transaction nothing stays.
        ok(&mut s, "BEGIN").await;
        affected(&mut s, "INSERT INTO c VALUES (2, 'b', 0) ON DUPLICATE KEY UPDATE n = 1000").await;
        ok(&mut s, "ROLLBACK").await;
        assert_eq!(column(&mut s, "SELECT n FROM c WHERE id = 2").await, vec!["70"]);

        // --- INSERT ... SELECT.
        ok(
            &mut s,
            "CREATE TABLE d (id INT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(20), total DOUBLE, raw VARBINARY(8))",
        )
        .await;
        assert_eq!(
            affected(&mut s, "INSERT INTO d (name, total) SELECT name, n / 4 FROM c WHERE id < 10 ORDER BY id").await,
            2
        );
        assert_eq!(
            rows(&mut s, "SELECT id, name, total FROM d ORDER BY id").await,
            vec![r(&["1", "b", "17.5"]), r(&["2", "z", "1.25"])]
        );
        // From itself (read whole first), with an expression and binary.
        assert_eq!(
            affected(&mut s, "INSERT INTO d (name, total, raw) SELECT CONCAT(name, '2'), total * 2, X'00FF' FROM d").await,
            2
        );
        assert_eq!(column(&mut s, "SELECT COUNT(*) FROM d").await, vec!["4"]);
        assert_eq!(
            column(&mut s, "SELECT id FROM d WHERE raw = X'00FF' ORDER BY id").await,
            vec!["3", "4"]
        );
        // A grouping SELECT (its exact decimals arrive as text).
        ok(&mut s, "CREATE TABLE sums (name VARCHAR(20) PRIMARY KEY, total BIGINT, cnt INT)").await;
        assert_eq!(
            affected(&mut s, "INSERT INTO sums SELECT IF(total > 5, 'big', 'small'), SUM(id), COUNT(*) FROM d GROUP BY 1").await,
            2
        );
        assert_eq!(
            rows(&mut s, "SELECT * FROM sums ORDER BY name").await,
            vec![r(&["big", "4", "2"]), r(&["small", "6", "2"])]
        );
        // Wrong shapes.
        err_code(&mut s, "INSERT INTO sums SELECT id FROM d", 1136).await;
        err_code(&mut s, "INSERT INTO sums SELECT 'big', 1, 1", 1062).await;
        err_code(&mut s, "INSERT INTO sums SELECT name, id, id FROM nope", 1146).await;
        // INSERT IGNORE ... SELECT skips the duplicates, its own too.
        assert_eq!(
            affected(&mut s, "INSERT IGNORE INTO sums SELECT IF(id > 2, 'big', 'new'), 1, 1 FROM d").await,
            1
        );
        // ... ON DUPLICATE KEY UPDATE with a SELECT.
        assert_eq!(
            affected(&mut s, "INSERT INTO sums SELECT 'big', 5, 5 FROM d WHERE id = 1 ON DUPLICATE KEY UPDATE cnt = cnt + 1").await,
            2
        );
        assert_eq!(column(&mut s, "SELECT cnt FROM sums WHERE name = 'big'").await, vec!["3"]);
    });
}

/// Joins against a model: random rows in three tables, then inner, left,
/// comma and three-table joins through each access (by primary key, a
/// hash of the equated columns, nested loops), grouped, ordered and
/// limited, compared with the same joins computed here; and their errors.
#[test]
fn joins_agree_with_a_model() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let factory = SessionFactory::new(native.clone());
        let mut s = factory.session("root", "127.0.0.1");
        ok(&mut s, "CREATE DATABASE j; USE j").await;
        ok(&mut s, "CREATE TABLE a (id INT PRIMARY KEY, b_id INT, v INT, KEY (b_id))").await;
        ok(&mut s, "CREATE TABLE b (id INT PRIMARY KEY, name VARCHAR(10) NOT NULL, w INT)").await;
        ok(&mut s, "CREATE TABLE c (b_id INT, seq INT, x INT, PRIMARY KEY (b_id, seq))").await;
        let seed = std::env::var("SHOAL_TEST_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0x5eed_7011_u64);
        eprintln!("joins_agree_with_a_model: SHOAL_TEST_SEED={seed}");
        let mut rng = Rng(seed);
        // (id, b_id, v), (id, name, w), (b_id, seq, x)
        let mut ta: Vec<(i64, Option<i64>, i64)> = Vec::new();
        let mut tb: Vec<(i64, String, Option<i64>)> = Vec::new();
        let mut tc: Vec<(i64, i64, i64)> = Vec::new();
        for id in 0..60 {
            let b_id = (rng.below(8) != 0).then(|| rng.below(25));
            ta.push((id, b_id, rng.below(100)));
        }
        for id in 0..25 {
            if rng.below(5) != 0 {
                let w = (rng.below(6) != 0).then(|| rng.below(100));
                tb.push((id, format!("n{}", rng.below(6)), w));
            }
        }
        for b_id in 0..25 {
            for seq in 0..rng.below(4) {
                tc.push((b_id, seq, rng.below(100)));
            }
        }
        for (id, b_id, v) in &ta {
            ok(&mut s, &format!("INSERT INTO a VALUES ({id}, {}, {v})", sql_opt(*b_id))).await;
        }
        for (id, name, w) in &tb {
            ok(&mut s, &format!("INSERT INTO b VALUES ({id}, '{name}', {})", sql_opt(*w))).await;
        }
        for (b_id, seq, x) in &tc {
            ok(&mut s, &format!("INSERT INTO c VALUES ({b_id}, {seq}, {x})")).await;
        }
        let b_of = |id: Option<i64>| id.and_then(|id| tb.iter().find(|b| b.0 == id));
        let txt = |v: i64| Some(v.to_string());
        let opt = |v: Option<i64>| v.map(|v| v.to_string());

        // Inner join by b's primary key.
        let want: Vec<Vec<Option<String>>> = ta
            .iter()
            .filter_map(|a| b_of(a.1).map(|b| vec![txt(a.0), Some(b.1.clone())]))
            .collect();
        assert_eq!(
            rows(&mut s, "SELECT a.id, b.name FROM a JOIN b ON b.id = a.b_id ORDER BY a.id").await,
            want
        );
        // The same as a comma join with the condition in WHERE.
        assert_eq!(
            rows(&mut s, "SELECT a.id, name FROM a, b WHERE a.b_id = b.id ORDER BY 1").await,
            want
        );
        // LEFT JOIN keeps every a, NULLs where no b matches.
        let want: Vec<Vec<Option<String>>> = ta
            .iter()
            .map(|a| vec![txt(a.0), b_of(a.1).map(|b| b.1.clone()), b_of(a.1).and_then(|b| opt(b.2))])
            .collect();
        assert_eq!(
            rows(&mut s, "SELECT a.id, b.name, b.w FROM a LEFT JOIN b ON b.id = a.b_id ORDER BY a.id").await,
            want
        );
        // LEFT JOIN ... WHERE b.id IS NULL: the a rows with no b.
        let want: Vec<String> = ta
            .iter()
            .filter(|a| b_of(a.1).is_none())
            .map(|a| a.0.to_string())
            .collect();
        assert_eq!(
            column(&mut s, "SELECT a.id FROM a LEFT JOIN b ON a.b_id = b.id WHERE b.id IS NULL ORDER BY a.id").await,
            want
        );
        // A hash join (c's key is (b_id, seq); only b_id is equated),
        // with a condition of c's own pushed down.
        let mut want: Vec<Vec<Option<String>>> = Vec::new();
        for a in &ta {
            for c in tc.iter().filter(|c| Some(c.0) == a.1 && c.2 >= 30) {
                want.push(vec![txt(a.0), txt(c.1), txt(c.2)]);
            }
        }
        assert_eq!(
            rows(&mut s, "SELECT a.id, c.seq, c.x FROM a INNER JOIN c ON c.b_id = a.b_id AND c.x >= 30 ORDER BY a.id, c.seq").await,
            want
        );
        // USING, counted.
        let n = ta
            .iter()
            .map(|a| tc.iter().filter(|c| Some(c.0) == a.1).count())
            .sum::<usize>();
        assert_eq!(
            column(&mut s, "SELECT COUNT(*) FROM a JOIN c USING (b_id)").await,
            vec![n.to_string()]
        );
        // A USING column is one column: unqualified it is not ambiguous,
        // and `*` lists it once, first.
        if let Outcome::Rows { columns, .. } =
            ok(&mut s, "SELECT * FROM a JOIN c USING (b_id) LIMIT 1").await
        {
            let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(names, ["b_id", "id", "v", "seq", "x"]);
        }
        let mut per: std::collections::BTreeMap<i64, usize> = Default::default();
        for a in &ta {
            for c in tc.iter().filter(|c| Some(c.0) == a.1) {
                *per.entry(c.0).or_default() += 1;
            }
        }
        let want: Vec<Vec<Option<String>>> = per
            .iter()
            .map(|(k, n)| vec![Some(k.to_string()), Some(n.to_string())])
            .collect();
        assert_eq!(
            rows(&mut s, "SELECT b_id, COUNT(*) FROM a JOIN c USING (b_id) GROUP BY b_id ORDER BY b_id").await,
            want
        );
        assert_eq!(
            rows(&mut s, "SELECT FLOOR(-1.5), CEIL(1.2), CEILING(-1.2), FLOOR(7)").await,
            vec![r(&["-2", "2", "-1", "7"])]
        );
        // Nested loops (no equality): a comparison across tables.
        let n = ta
            .iter()
            .map(|a| tb.iter().filter(|b| b.2.is_some_and(|w| a.2 < w)).count())
            .sum::<usize>();
        assert_eq!(
            column(&mut s, "SELECT COUNT(*) FROM a CROSS JOIN b WHERE a.v < b.w").await,
            vec![n.to_string()]
        );
        // Grouped over a join.
        let mut groups: std::collections::BTreeMap<String, (u64, i64)> = Default::default();
        for a in &ta {
            if let Some(b) = b_of(a.1) {
                let g = groups.entry(b.1.clone()).or_default();
                g.0 += 1;
                g.1 += a.2;
            }
        }
        let want: Vec<Vec<Option<String>>> = groups
            .iter()
            .map(|(name, (n, sum))| vec![Some(name.clone()), Some(n.to_string()), Some(sum.to_string())])
            .collect();
        assert_eq!(
            rows(&mut s, "SELECT b.name, COUNT(*), SUM(a.v) FROM a JOIN b ON a.b_id = b.id GROUP BY b.name ORDER BY b.name").await,
            want
        );
        // Three tables, the last LEFT with a constant in its ON, limited.
        let mut want: Vec<Vec<Option<String>>> = Vec::new();
        for a in &ta {
            if let Some(b) = b_of(a.1) {
                let c = tc.iter().find(|c| c.0 == b.0 && c.1 == 1);
                want.push(vec![txt(a.0), Some(b.1.clone()), c.map(|c| c.2.to_string())]);
            }
        }
        want.truncate(10);
        assert_eq!(
            rows(&mut s, "SELECT a.id, b.name, c.x FROM a JOIN b ON b.id = a.b_id LEFT JOIN c ON c.b_id = b.id AND c.seq = 1 ORDER BY a.id LIMIT 10").await,
            want
        );
        // A self-join through aliases; SELECT * gives every table's
        // columns in order, named as their tables name them.
        let want: Vec<Vec<Option<String>>> = ta
            .iter()
            .filter_map(|x| ta.iter().find(|y| y.0 == x.2).map(|y| vec![txt(x.0), txt(y.0), txt(y.2)]))
            .collect();
        assert_eq!(
            rows(&mut s, "SELECT x.id, y.id, y.v FROM a AS x JOIN a AS y ON y.id = x.v ORDER BY x.id").await,
            want
        );
        if let Outcome::Rows { columns, rows } =
            ok(&mut s, "SELECT * FROM a JOIN b ON b.id = a.b_id ORDER BY a.id LIMIT 1").await
        {
            let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(names, ["id", "b_id", "v", "id", "name", "w"]);
            assert_eq!(columns[0].table, "a");
            assert_eq!(columns[3].table, "b");
            assert_eq!(rows.len(), 1);
        }
        if let Outcome::Rows { columns, .. } = ok(&mut s, "SELECT b.*, a.v + 1 AS v1 FROM a JOIN b ON b.id = a.b_id LIMIT 1").await {
            let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(names, ["id", "name", "w", "v1"]);
        }
        // INSERT ... SELECT from a join.
        ok(&mut s, "CREATE TABLE ab (id INT PRIMARY KEY, name VARCHAR(10))").await;
        let n = ta.iter().filter(|a| b_of(a.1).is_some()).count() as u64;
        assert_eq!(
            affected(&mut s, "INSERT INTO ab SELECT a.id, b.name FROM a JOIN b ON b.id = a.b_id").await,
            n
        );
        // Errors.
        err_code(&mut s, "SELECT id FROM a JOIN b ON a.b_id = b.id", 1052).await;
        err_code(&mut s, "SELECT a.id FROM a JOIN a ON a.id = a.v", 1066).await;
        err_code(&mut s, "SELECT a.id FROM a RIGHT JOIN b ON a.b_id = b.id", 1235).await;
        err_code(&mut s, "SELECT a.id FROM a JOIN nope ON a.b_id = nope.id", 1146).await;
        err_code(&mut s, "SELECT a.nope FROM a JOIN b ON a.b_id = b.id", 1054).await;
        err_code(&mut s, "SELECT a.id FROM a JOIN b USING (nope)", 1054).await;
        // USING a column two earlier tables have is ambiguous, unless an
        // earlier USING made them one.
        err_code(&mut s, "SELECT 1 FROM a JOIN b ON a.b_id = b.id JOIN a AS x USING (id)", 1052).await;
        assert_eq!(
            column(&mut s, "SELECT COUNT(*) FROM a JOIN a AS x USING (id) JOIN a AS y USING (id)").await,
            vec![ta.len().to_string()]
        );

        // --- UNION [ALL].
        let mut ids: std::collections::BTreeSet<i64> = tb.iter().map(|b| b.0).filter(|&i| i < 10).collect();
        ids.extend(tc.iter().map(|c| c.0).filter(|&i| i < 10));
        assert_eq!(
            column(&mut s, "SELECT id FROM b WHERE id < 10 UNION SELECT b_id FROM c WHERE b_id < 10 ORDER BY 1").await,
            ids.iter().map(|i| i.to_string()).collect::<Vec<_>>()
        );
        let all = tb.iter().filter(|b| b.0 < 10).count() + tc.iter().filter(|c| c.0 < 10).count();
        assert_eq!(
            column(&mut s, "SELECT COUNT(*) FROM b WHERE id < 10 UNION ALL SELECT COUNT(*) FROM c WHERE b_id < 10").await.len(),
            2
        );
        assert_eq!(
            column(&mut s, "SELECT id FROM b WHERE id < 10 UNION ALL SELECT b_id FROM c WHERE b_id < 10").await.len(),
            all
        );
        assert_eq!(column(&mut s, "SELECT 1 UNION SELECT 1").await, vec!["1"]);
        assert_eq!(column(&mut s, "SELECT 1 UNION ALL SELECT 1").await, vec!["1", "1"]);
        // A DISTINCT union removes the duplicates of everything before it.
        assert_eq!(column(&mut s, "SELECT 2 UNION ALL SELECT 2 UNION SELECT 3 ORDER BY 1 DESC").await, vec!["3", "2"]);
        assert_eq!(
            column(&mut s, "SELECT name AS n FROM b UNION SELECT 'zz' ORDER BY n DESC LIMIT 1").await,
            vec!["zz"]
        );
        // Typed by every SELECT, values converted before duplicates go.
        let kinds = |o: Outcome| match o {
            Outcome::Rows { columns, .. } => columns.iter().map(|c| c.kind).collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        use shoal_sql::ColumnKind as K;
        for (q, kind, want) in [
            ("SELECT 1 AS a UNION SELECT 'abc'", K::VarString, vec!["1", "abc"]),
            ("SELECT 1 UNION SELECT '1'", K::VarString, vec!["1"]),
            ("SELECT 1 UNION SELECT 1.5", K::NewDecimal, vec!["1.0", "1.5"]),
            ("SELECT 1 UNION SELECT 1.0", K::NewDecimal, vec!["1.0"]),
            ("SELECT 1 UNION SELECT 2.5e0", K::Double, vec!["1", "2.5"]),
            ("SELECT NULL UNION SELECT 7", K::LongLong, vec!["NULL", "7"]),
            ("SELECT CAST('2020-01-02' AS DATE) UNION SELECT 'x'", K::VarString, vec!["2020-01-02", "x"]),
            ("SELECT 1.5 UNION SELECT 2.25", K::NewDecimal, vec!["1.50", "2.25"]),
            (
                "SELECT CAST('2020-01-02' AS DATE) UNION SELECT CAST('2020-01-02 00:00:00' AS DATETIME)",
                K::DateTime,
                vec!["2020-01-02 00:00:00"],
            ),
        ] {
            assert_eq!(kinds(ok(&mut s, q).await), vec![kind], "{q}");
            assert_eq!(column(&mut s, q).await, want, "{q}");
        }
        // An expression over a table is typed once it ran: its numbers
        // still sort as numbers.
        assert_eq!(
            column(&mut s, "SELECT id * 10 AS k FROM b WHERE id < 3 UNION ALL SELECT 9 ORDER BY k").await,
            vec!["9", "10"]
        );
        err_code(&mut s, "SELECT 1, 2 UNION SELECT 3", 1222).await;
        err_code(&mut s, "SELECT 1 UNION SELECT 1, 2 FROM b WHERE 1 = 0", 1222).await;
        // A branch with a subquery; a parenthesized UNION inside a UNION
        // is refused, not flattened (its DISTINCT would reach outside).
        assert_eq!(
            column(&mut s, "SELECT COUNT(*) FROM a WHERE b_id IN (SELECT id FROM b) UNION ALL SELECT -1").await.len(),
            2
        );
        err_code(&mut s, "SELECT 1 UNION ALL (SELECT 1 UNION SELECT 2)", 1235).await;
        assert_eq!(
            rows(&mut s, "SELECT ROUND(1.5, -1e30), ROUND(0e0, 400), TRUNCATE(0e0, 400)").await,
            vec![r(&["0", "0", "0"])]
        );
        err_code(&mut s, "SELECT 1 UNION SELECT 2 ORDER BY nope", 1054).await;

        // --- EXPLAIN: (table, type, key, rows, Extra) per table.
        let explain = |rows: Vec<Vec<Option<String>>>| -> Vec<[Option<String>; 5]> {
            rows.into_iter()
                .map(|r| [r[2].clone(), r[4].clone(), r[6].clone(), r[9].clone(), r[11].clone()])
                .collect()
        };
        let o = |v: &str| (v != "NULL").then(|| v.to_string());
        assert_eq!(
            explain(rows(&mut s, "EXPLAIN SELECT * FROM b WHERE id = 3").await),
            vec![[o("b"), o("const"), o("PRIMARY"), o("1"), None]]
        );
        assert_eq!(
            explain(rows(&mut s, "DESCRIBE SELECT name FROM b WHERE id IN (1, 2, 3) AND w > 5").await),
            vec![[o("b"), o("range"), o("PRIMARY"), o("3"), o("Using where")]]
        );
        assert_eq!(
            explain(rows(&mut s, "EXPLAIN SELECT * FROM b WHERE w > 5 ORDER BY name").await),
            vec![[o("b"), o("ALL"), None, None, o("Using where with pushed condition; Using filesort")]]
        );
        // utf8mb4_bin pads: a VARCHAR compared in a filter pushed to the
        // data nodes ignores trailing spaces, as the SQL node does.
        ok(&mut s, "CREATE TABLE pad (id INT PRIMARY KEY, v VARCHAR(8))").await;
        ok(&mut s, "INSERT INTO pad VALUES (1, 'x '), (2, 'x'), (3, 'y')").await;
        let pushed = explain(rows(&mut s, "EXPLAIN SELECT id FROM pad WHERE v = 'x'").await);
        assert_eq!(pushed[0][4], o("Using where with pushed condition"), "{pushed:?}");
        assert_eq!(column(&mut s, "SELECT id FROM pad WHERE v = 'x' ORDER BY id").await, vec!["1", "2"]);
        // (Not pushed: a constant with trailing spaces is not exact.)
        assert_eq!(column(&mut s, "SELECT id FROM pad WHERE v = 'x   ' ORDER BY id").await, vec!["1", "2"]);
        // A byte string is compared byte by byte, trailing spaces counting,
        // so it stays in the SQL node.
        for (q, want) in [
            ("v = X'78'", vec!["2"]),
            ("v <> X'78'", vec!["1", "3"]),
            ("v > X'78'", vec!["1", "3"]),
            ("v NOT IN (X'78')", vec!["1", "3"]),
            ("v NOT BETWEEN X'78' AND X'78'", vec!["1", "3"]),
        ] {
            assert_eq!(column(&mut s, &format!("SELECT id FROM pad WHERE {q} ORDER BY id")).await, want, "{q}");
        }
        assert_eq!(column(&mut s, "SELECT id FROM pad WHERE v > 'x' ORDER BY id").await, vec!["3"]);
        assert_eq!(column(&mut s, "SELECT id FROM pad WHERE v LIKE 'x' ORDER BY id").await, vec!["2"]);
        // Arithmetic of constants is computed before planning: a bound
        // written as `2 + 1` is a key like `3`.
        assert_eq!(
            explain(rows(&mut s, "EXPLAIN SELECT * FROM b WHERE id = 2 + 1").await),
            vec![[o("b"), o("const"), o("PRIMARY"), o("1"), None]]
        );
        assert_eq!(
            rows(&mut s, "SELECT id FROM b WHERE id BETWEEN 4 - 3 AND 4 DIV 2 ORDER BY id").await,
            rows(&mut s, "SELECT id FROM b WHERE id BETWEEN 1 AND 2 ORDER BY id").await
        );
        let by_index = explain(rows(&mut s, "EXPLAIN SELECT id FROM a WHERE b_id BETWEEN 1 AND 5 ORDER BY b_id").await);
        assert_eq!(by_index[0][1], o("range"), "{by_index:?}");
        assert!(by_index[0][2].is_some(), "{by_index:?}");
        assert_eq!(
            explain(rows(&mut s, "EXPLAIN SELECT a.id, b.name FROM a JOIN b ON b.id = a.b_id").await),
            vec![
                [o("a"), o("ALL"), None, None, None],
                [o("b"), o("eq_ref"), o("PRIMARY"), o("1"), None],
            ]
        );
        let hashed = explain(rows(&mut s, "EXPLAIN SELECT COUNT(*) FROM a JOIN c USING (b_id) WHERE c.x > 3").await);
        assert_eq!(hashed[1][4], o("Using where with pushed condition; Using join buffer (hash join)"), "{hashed:?}");
        let looped = explain(rows(&mut s, "EXPLAIN SELECT COUNT(*) FROM a, b WHERE a.v < b.w").await);
        assert_eq!(looped[1][4], o("Using join buffer (nested loops)"), "{looped:?}");
        err_code(&mut s, "EXPLAIN DELETE FROM a", 1235).await;

        // --- EXPLAIN's partitions: a key read's fragment, as the native
        // client routes the key; an index scan pruned to the fragment its
        // equality on the distribution key fixes; every fragment for a scan.
        let partitions = |rows: Vec<Vec<Option<String>>>| rows[0][3].clone().expect("partitions");
        ok(
            &mut s,
            "CREATE TABLE pk2 (a INT, b INT, v INT, PRIMARY KEY (a, b)) PARTITION BY KEY (a) PARTITIONS 4",
        )
        .await;
        let pk2 = native.table("j.pk2").await.expect("the SQL table, natively");
        let scan_all = partitions(rows(&mut s, "EXPLAIN SELECT * FROM pk2 WHERE v > 1").await);
        assert_eq!(scan_all, "p0,p1,p2,p3");
        let mut seen = std::collections::BTreeSet::new();
        for a in 0..12i64 {
            let want = pk2
                .fragment_of_values(&[Value::Int(a)])
                .map(|f| format!("p{f}"))
                .expect("the table's distribution is known");
            let key_read = partitions(rows(&mut s, &format!("EXPLAIN SELECT * FROM pk2 WHERE a = {a} AND b = 1")).await);
            let pruned = explain(rows(&mut s, &format!("EXPLAIN SELECT * FROM pk2 WHERE a = {a}")).await);
            assert_eq!(pruned[0][1], o("range"), "{pruned:?}");
            assert_eq!(
                partitions(rows(&mut s, &format!("EXPLAIN SELECT * FROM pk2 WHERE a = {a}")).await),
                key_read,
                "a = {a}: the scan is pruned to the key's fragment"
            );
            assert_eq!(key_read, want, "a = {a}");
            seen.insert(key_read);
        }
        assert!(seen.len() > 1, "keys spread over fragments: {seen:?}");
        let two = partitions(rows(&mut s, "EXPLAIN SELECT * FROM pk2 WHERE a IN (0, 1) AND b = 1").await);
        let each: std::collections::BTreeSet<String> = [0, 1]
            .iter()
            .map(|a| format!("p{}", pk2.fragment_of_values(&[Value::Int(*a)]).expect("known")))
            .collect();
        assert_eq!(two, each.into_iter().collect::<Vec<_>>().join(","));
        assert_eq!(partitions(rows(&mut s, "EXPLAIN SELECT * FROM pk2 WHERE a > 3").await), scan_all);
        // No key can match: no partition is read (NULL, as MySQL shows it).
        assert_eq!(rows(&mut s, "EXPLAIN SELECT * FROM pk2 WHERE a = NULL AND b = 1").await[0][3], None);
        ok(&mut s, "DROP TABLE pk2").await;

        // --- Subqueries (run first, their results constants).
        let big: Vec<i64> = tb.iter().filter(|b| b.2.is_some_and(|w| w > 50)).map(|b| b.0).collect();
        let want: Vec<String> = ta
            .iter()
            .filter(|a| a.1.is_some_and(|x| big.contains(&x)))
            .map(|a| a.0.to_string())
            .collect();
        assert_eq!(
            column(&mut s, "SELECT id FROM a WHERE b_id IN (SELECT id FROM b WHERE w > 50) ORDER BY id").await,
            want
        );
        // NOT IN: a NULL in the list makes every non-member unknown.
        let want: Vec<String> = ta
            .iter()
            .filter(|a| a.1.is_some_and(|x| !big.contains(&x)))
            .map(|a| a.0.to_string())
            .collect();
        assert_eq!(
            column(&mut s, "SELECT id FROM a WHERE b_id NOT IN (SELECT id FROM b WHERE w > 50) ORDER BY id").await,
            want
        );
        assert_eq!(
            column(&mut s, "SELECT COUNT(*) FROM b WHERE id NOT IN (SELECT b_id FROM a)").await,
            vec!["0"]
        );
        let max_v = ta.iter().map(|a| a.2).max().unwrap();
        assert_eq!(
            column(&mut s, "SELECT (SELECT MAX(v) FROM a) + 1").await,
            vec![(max_v + 1).to_string()]
        );
        let want: Vec<String> = ta.iter().filter(|a| a.2 == max_v).map(|a| a.0.to_string()).collect();
        assert_eq!(
            column(&mut s, "SELECT id FROM a WHERE v = (SELECT MAX(v) FROM a) ORDER BY id").await,
            want
        );
        assert_eq!(
            column(&mut s, "SELECT COUNT(*) FROM a WHERE EXISTS (SELECT 1 FROM b WHERE w > 1000)").await,
            vec!["0"]
        );
        assert_eq!(
            column(&mut s, "SELECT COUNT(*) FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE w > 1000)").await,
            vec![ta.len().to_string()]
        );
        // In a join's WHERE, in HAVING, nested.
        assert_eq!(
            column(&mut s, "SELECT COUNT(*) FROM a JOIN b ON b.id = a.b_id WHERE b.id IN (SELECT b_id FROM c WHERE seq = 0)").await,
            vec![ta
                .iter()
                .filter(|a| b_of(a.1).is_some_and(|b| tc.iter().any(|c| c.0 == b.0 && c.1 == 0)))
                .count()
                .to_string()]
        );
        assert_eq!(
            column(&mut s, "SELECT COUNT(*) FROM a WHERE id IN (SELECT id FROM a WHERE v IN (SELECT MAX(v) FROM a))").await,
            vec![ta.iter().filter(|a| a.2 == max_v).count().to_string()]
        );
        // UPDATE and DELETE with a subquery over their own table.
        ok(&mut s, "CREATE TABLE s (id INT PRIMARY KEY, v INT)").await;
        ok(&mut s, "INSERT INTO s VALUES (1, 10), (2, 20), (3, 30)").await;
        assert_eq!(affected(&mut s, "UPDATE s SET v = v + 1 WHERE v < (SELECT AVG(v) FROM s)").await, 1);
        assert_eq!(affected(&mut s, "DELETE FROM s WHERE v = (SELECT MAX(v) FROM s)").await, 1);
        assert_eq!(
            rows(&mut s, "SELECT id, v FROM s ORDER BY id").await,
            vec![r(&["1", "11"]), r(&["2", "20"])]
        );
        // Errors: shape, rows, correlation, in a VALUES list.
        err_code(&mut s, "SELECT (SELECT id FROM s)", 1242).await;
        err_code(&mut s, "SELECT 1 FROM s WHERE id IN (SELECT id, v FROM s)", 1241).await;
        // A correlated EXISTS tied by one equality runs as a semi-join, its
        // NOT too (a NULL b_id has no b); against the model.
        let with_b = |a: &(i64, Option<i64>, i64)| a.1.is_some_and(|b| tb.iter().any(|t| t.0 == b && t.2.is_some()));
        for (sql, negated) in [
            ("SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.id = a.b_id AND w IS NOT NULL) ORDER BY id", false),
            ("SELECT id FROM a x WHERE NOT EXISTS (SELECT * FROM b WHERE x.b_id = id AND w IS NOT NULL) ORDER BY id", true),
        ] {
            let want: Vec<String> = ta.iter().filter(|a| with_b(a) != negated).map(|a| a.0.to_string()).collect();
            assert_eq!(column(&mut s, sql).await, want, "{sql}");
        }
        // Other correlated forms: 1054, saying so.
        let e = err_code(&mut s, "SELECT id FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.id = a.b_id AND b.w = a.v)", 1054).await;
        assert!(e.message.contains("correlated"), "{}", e.message);
        let e = err_code(&mut s, "SELECT id, (SELECT name FROM b WHERE b.id = a.b_id) FROM a", 1054).await;
        assert!(e.message.contains("correlated"), "{}", e.message);
        err_code(&mut s, "INSERT INTO s VALUES (9, (SELECT 1))", 1235).await;
        // One subquery text used two ways in a statement: two results.
        assert_eq!(
            rows(&mut s, "SELECT (SELECT COUNT(*) FROM s), EXISTS (SELECT COUNT(*) FROM s)").await,
            vec![r(&["2", "1"])]
        );
        // ANY / ALL are not run as scalar subqueries (no 1242).
        err_code(&mut s, "SELECT id FROM s WHERE v > ANY (SELECT v FROM s)", 1235).await;
    });
}

/// Values keep their type through a grouping or a join into INSERT ...
/// SELECT and subqueries (FLOAT, exact DECIMAL sums), decimals a double
/// cannot tell apart group apart and in order, and EXISTS / scalar
/// subqueries answer right with the row limit they are given (that they
/// read no more rows is not observed here).
#[test]
fn values_keep_their_type_through_groups_joins_and_subqueries() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let factory = SessionFactory::new(native.clone());
        let mut s = factory.session("root", "127.0.0.1");
        ok(&mut s, "CREATE DATABASE vt; USE vt").await;
        ok(&mut s, "CREATE TABLE f (id INT PRIMARY KEY, x FLOAT, d DECIMAL(19,4))").await;
        ok(
            &mut s,
            "INSERT INTO f VALUES (1, 1.1, 123456789012345.1235), (2, 1234567, 123456789012345.1234), (3, -0.5, -1.5), (4, NULL, -1.4)",
        )
        .await;
        // A FLOAT through MAX() and a join compares equal to itself.
        assert_eq!(column(&mut s, "SELECT id FROM f WHERE x = (SELECT MAX(x) FROM f)").await, vec!["2"]);
        assert_eq!(column(&mut s, "SELECT id FROM f WHERE x = (SELECT MIN(x) FROM f WHERE x > 0)").await, vec!["1"]);
        ok(&mut s, "CREATE TABLE g (id INT PRIMARY KEY, x FLOAT, s DECIMAL(30,4))").await;
        assert_eq!(
            affected(&mut s, "INSERT INTO g SELECT a.id, a.x, a.d FROM f AS a JOIN f AS b ON b.id = a.id").await,
            4
        );
        assert_eq!(column(&mut s, "SELECT COUNT(*) FROM g JOIN f USING (id) WHERE g.x = f.x").await, vec!["3"]);
        assert_eq!(
            affected(&mut s, "INSERT INTO g SELECT 10, MAX(x), SUM(d) FROM f").await,
            1
        );
        assert_eq!(
            rows(&mut s, "SELECT s, x = (SELECT MAX(x) FROM f) FROM g WHERE id = 10").await,
            vec![r(&["246913578024687.3469", "1"])]
        );
        // Decimals one double cannot tell apart: two groups, in order.
        assert_eq!(
            rows(&mut s, "SELECT d, COUNT(*) FROM f GROUP BY d ORDER BY d").await,
            vec![
                r(&["-1.5000", "1"]),
                r(&["-1.4000", "1"]),
                r(&["123456789012345.1234", "1"]),
                r(&["123456789012345.1235", "1"]),
            ]
        );
        assert_eq!(column(&mut s, "SELECT COUNT(DISTINCT d) FROM f").await, vec!["4"]);
        // EXISTS and a scalar subquery (read with LIMIT 1 / 2).
        assert_eq!(column(&mut s, "SELECT EXISTS (SELECT * FROM f)").await, vec!["1"]);
        assert_eq!(column(&mut s, "SELECT (SELECT id FROM f WHERE id > 3)").await, vec!["4"]);
        err_code(&mut s, "SELECT (SELECT id FROM f)", 1242).await;
        // NULL IN an empty subquery is false, NOT IN true (MySQL's rule).
        assert_eq!(
            rows(&mut s, "SELECT NULL IN (SELECT id FROM f WHERE id < 0), NULL NOT IN (SELECT id FROM f WHERE id < 0)").await,
            vec![r(&["0", "1"])]
        );
        // A sum past 38 digits is out of range, never a wrapped i128 that
        // a later division or negation cannot take.
        ok(&mut s, "CREATE TABLE dd (id INT PRIMARY KEY, d DECIMAL(38,1))").await;
        ok(
            &mut s,
            "INSERT INTO dd VALUES (1, -9999999999999999999999999999999999999.9), (2, -7014118346046923173168730371588410572.9)",
        )
        .await;
        err_code(&mut s, "SELECT SUM(d) DIV -0.1 FROM dd", 1690).await;
        err_code(&mut s, "SELECT SUM(d) % -0.1 FROM dd", 1690).await;
        err_code(&mut s, "SELECT -SUM(d) FROM dd", 1690).await;
        err_code(&mut s, "SELECT MIN(d) DIV -1 FROM dd WHERE id = 2", 1690).await;
        assert_eq!(column(&mut s, "SELECT 1").await, vec!["1"], "the node is up");
    });
}
