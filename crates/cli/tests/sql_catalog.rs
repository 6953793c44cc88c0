//! information_schema and the warnings a session keeps, over a real
//! cluster: sessions (`shoal_sql::Session`, no wire) for SCHEMATA,
//! TABLES, COLUMNS and STATISTICS as schema changes and as accounts see
//! them, and for every kind of warning with SHOW WARNINGS and
//! `@@warning_count`; then the `mariadb` client against a `shoal sql`
//! process, whose `--show-warnings` asks for warnings only when the OK
//! packet counts some.

mod common;

use common::sql_node::{query, start_sql, stderr};
use common::sql_session::*;
use common::{runtime, TestCluster};
use shoal_client::{Cluster, ColumnDef, ColumnType, TableDef};
use shoal_sql::{Handler, Outcome, Session, SessionFactory};
use std::process::Command;

/// SHOW WARNINGS as (level, code, message) rows.
async fn warnings(s: &mut Session) -> Vec<(String, u16, String)> {
    rows(s, "SHOW WARNINGS")
        .await
        .into_iter()
        .map(|r| {
            let cell = |i: usize| r[i].clone().unwrap_or_default();
            (cell(0), cell(1).parse().unwrap_or(0), cell(2))
        })
        .collect()
}

async fn codes(s: &mut Session) -> Vec<u16> {
    warnings(s).await.into_iter().map(|(_, c, _)| c).collect()
}

async fn warning_count(s: &mut Session) -> u64 {
    numbers(s, "SELECT @@warning_count").await[0]
}

/// Runs `sql` (one statement that succeeds) and checks that its OK
/// packet counts what SHOW COUNT(*) WARNINGS then reports.
async fn ok_counted(s: &mut Session, sql: &str) -> u16 {
    let Outcome::Ok { warnings, info, .. } = ok(s, sql).await else {
        panic!("{sql}: expected an OK");
    };
    let counted = numbers(s, "SHOW COUNT(*) WARNINGS").await[0];
    assert_eq!(u64::from(warnings), counted, "{sql}");
    // The info string, when there is one, counts the same.
    if info.contains("Warnings:") {
        assert!(
            info.ends_with(&format!("Warnings: {warnings}")),
            "{sql}: {info}"
        );
    }
    warnings
}

#[test]
fn information_schema_describes_the_schema_as_accounts_see_it() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let factory = SessionFactory::new(native.clone());
        let mut s = factory.session("root", "127.0.0.1");
        ok(&mut s, "CREATE DATABASE app; CREATE DATABASE secret").await;
        ok(
            &mut s,
            "CREATE TABLE app.items (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, \
             name VARCHAR(40) NOT NULL, price DECIMAL(10,2) DEFAULT 1.50, note CHAR(3), \
             UNIQUE KEY by_name (name), KEY by_price (price, note)) COMMENT='NDB_TABLE=READ_BACKUP=1'",
        )
        .await;
        ok(&mut s, "CREATE TABLE secret.hidden (k BIGINT PRIMARY KEY)").await;

        // SCHEMATA: every database root may use, sorted.
        let schemata = rows(
            &mut s,
            "SELECT catalog_name, schema_name, default_character_set_name, default_collation_name \
             FROM information_schema.SCHEMATA WHERE schema_name IN ('app', 'secret', 'information_schema')",
        )
        .await;
        assert_eq!(
            schemata,
            vec![
                r(&["def", "app", "utf8mb4", "utf8mb4_bin"]),
                r(&["def", "information_schema", "utf8mb4", "utf8mb4_bin"]),
                r(&["def", "secret", "utf8mb4", "utf8mb4_bin"]),
            ]
        );

        // TABLES, as ORMs ask: a database's tables with their options.
        ok(&mut s, "INSERT INTO app.items (name, price) VALUES ('a', 1), ('b', 2)").await;
        let tables = rows(
            &mut s,
            "SELECT TABLE_CATALOG, TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, ENGINE, AUTO_INCREMENT, \
             TABLE_COLLATION, TABLE_COMMENT FROM information_schema.tables \
             WHERE table_schema = 'app' ORDER BY table_name LIMIT 10",
        )
        .await;
        assert_eq!(
            tables,
            vec![r(&[
                "def",
                "app",
                "items",
                "BASE TABLE",
                "ndbcluster",
                "3",
                "utf8mb4_bin",
                "NDB_TABLE=READ_BACKUP=1"
            ])]
        );
        assert_eq!(
            numbers(
                &mut s,
                "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'app'"
            )
            .await,
            vec![1]
        );
        // Grouping over the virtual rows.
        let per_schema = rows(
            &mut s,
            "SELECT table_schema, COUNT(*) AS n FROM information_schema.tables \
             WHERE table_schema IN ('app', 'secret', 'information_schema') \
             GROUP BY table_schema ORDER BY n DESC, table_schema",
        )
        .await;
        assert_eq!(
            per_schema,
            vec![
                r(&["information_schema", "4"]),
                r(&["app", "1"]),
                r(&["secret", "1"]),
            ]
        );

        // COLUMNS, from the database itself (USE information_schema).
        ok(&mut s, "USE information_schema").await;
        let columns = rows(
            &mut s,
            "SELECT column_name, ordinal_position, column_default, is_nullable, data_type, \
             character_maximum_length, numeric_precision, numeric_scale, column_type, column_key, extra \
             FROM columns WHERE table_schema = 'app' AND table_name = 'items' ORDER BY ordinal_position",
        )
        .await;
        assert_eq!(
            columns,
            vec![
                r(&["id", "1", "NULL", "NO", "int", "NULL", "10", "0", "int unsigned", "PRI", "auto_increment"]),
                r(&["name", "2", "NULL", "NO", "varchar", "40", "NULL", "NULL", "varchar(40)", "UNI", ""]),
                r(&["price", "3", "1.50", "YES", "decimal", "NULL", "10", "2", "decimal(10,2)", "MUL", ""]),
                r(&["note", "4", "NULL", "YES", "char", "3", "NULL", "NULL", "char(3)", "", ""]),
            ]
        );
        // SELECT * gives every column, named as MySQL names them.
        if let Outcome::Rows { columns, rows } =
            ok(&mut s, "SELECT * FROM COLUMNS WHERE TABLE_NAME = 'items' LIMIT 1").await
        {
            assert_eq!(rows.len(), 1);
            let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
            for n in ["TABLE_SCHEMA", "COLUMN_NAME", "ORDINAL_POSITION", "COLUMN_TYPE", "COLUMN_KEY", "EXTRA"] {
                assert!(names.contains(&n), "{names:?}");
            }
        } else {
            panic!("SELECT * FROM COLUMNS: expected rows");
        }
        assert_eq!(
            column(&mut s, "SHOW TABLES").await,
            vec!["COLUMNS", "SCHEMATA", "STATISTICS", "TABLES"]
        );
        assert_eq!(column(&mut s, "SELECT 1 FROM DUAL").await, vec!["1"]);
        assert_eq!(
            column(&mut s, "SHOW COLUMNS FROM STATISTICS LIKE 'INDEX%'").await,
            vec!["INDEX_SCHEMA", "INDEX_NAME", "INDEX_TYPE", "INDEX_COMMENT"]
        );

        // STATISTICS: the primary key, the unique (hash) and ordered indexes.
        let stats_sql = "SELECT index_name, non_unique, seq_in_index, column_name, index_type, nullable \
             FROM statistics WHERE table_schema = 'app' AND table_name = 'items' \
             ORDER BY index_name, seq_in_index";
        assert_eq!(
            rows(&mut s, stats_sql).await,
            // Names compare in binary: upper case sorts first.
            vec![
                r(&["PRIMARY", "0", "1", "id", "BTREE", ""]),
                r(&["by_name", "0", "1", "name", "HASH", ""]),
                r(&["by_price", "1", "1", "price", "BTREE", "YES"]),
                r(&["by_price", "1", "2", "note", "BTREE", "YES"]),
            ]
        );

        // Schema changes show at once, here and in a second session.
        ok(&mut s, "CREATE INDEX by_note ON app.items (note)").await;
        ok(&mut s, "CREATE TABLE app.extra (id INT PRIMARY KEY)").await;
        let mut s2 = factory.session("root", "127.0.0.1");
        assert_eq!(
            column(
                &mut s2,
                "SELECT DISTINCT index_name FROM information_schema.statistics \
                 WHERE table_schema = 'app' AND table_name = 'items' ORDER BY 1"
            )
            .await,
            vec!["PRIMARY", "by_name", "by_note", "by_price"]
        );
        assert_eq!(
            column(
                &mut s2,
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'app' ORDER BY table_name DESC"
            )
            .await,
            vec!["items", "extra"]
        );
        ok(&mut s2, "DROP INDEX by_note ON app.items; DROP TABLE app.extra").await;
        assert_eq!(
            column(&mut s, "SELECT table_name FROM tables WHERE table_schema = 'app'").await,
            vec!["items"]
        );
        assert_eq!(
            numbers(
                &mut s,
                "SELECT COUNT(*) FROM statistics WHERE table_schema = 'app' AND index_name = 'by_note'"
            )
            .await,
            vec![0]
        );

        // Writing to information_schema is refused as MySQL refuses it;
        // joining it is not supported; unknown tables are named.
        for write in [
            "INSERT INTO information_schema.tables (table_name) VALUES ('x')",
            "DELETE FROM tables",
            "UPDATE information_schema.columns SET column_name = 'x'",
            "CREATE TABLE information_schema.mine (id INT PRIMARY KEY)",
            "DROP TABLE information_schema.tables",
            "DROP DATABASE information_schema",
        ] {
            err_code(&mut s, write, 1044).await;
        }
        err_code(
            &mut s,
            "SELECT t.table_name FROM information_schema.tables t JOIN app.items i ON i.name = t.table_name",
            1235,
        )
        .await;
        err_code(&mut s, "SELECT * FROM information_schema.routines", 1109).await;
        err_code(&mut s, "SELECT no_such_column FROM information_schema.tables", 1054).await;

        // An account sees only the databases it may use.
        ok(
            &mut s,
            "CREATE USER 'reader'@'%' IDENTIFIED BY 'pw'; GRANT ALL PRIVILEGES ON app.* TO 'reader'@'%'",
        )
        .await;
        let mut reader = factory.session("reader", "127.0.0.1");
        let seen = column(
            &mut reader,
            "SELECT schema_name FROM information_schema.schemata ORDER BY schema_name",
        )
        .await;
        assert_eq!(seen, vec!["app", "information_schema"]);
        let seen_tables = column(
            &mut reader,
            "SELECT DISTINCT table_schema FROM information_schema.columns ORDER BY 1",
        )
        .await;
        assert_eq!(seen_tables, vec!["app", "information_schema"]);
        assert_eq!(
            numbers(
                &mut reader,
                "SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = 'secret'"
            )
            .await,
            vec![0]
        );
        // information_schema is every account's to read, never to write.
        ok(&mut reader, "USE information_schema").await;
        err_code(&mut reader, "DROP TABLE tables", 1044).await;
    });
}

/// A prepared statement's execution (`?` replaced by `literals`).
async fn execute(s: &mut Session, sql: &str, literals: &[&str]) -> Result<Outcome, String> {
    let mut out = s.execute_collected(&execution(sql, literals)).await;
    out.pop().expect("an answer").map_err(|e| e.to_string())
}

/// A statement prepared on one SQL node keeps working, on the current
/// schema, after another SQL node or the native API changed its table:
/// what a node caches of a table is checked against the table's schema
/// version at each use, and a stale one is read again from mgmd.
#[test]
fn prepared_statements_follow_schema_changes_made_elsewhere() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        // Two API nodes: two SQL nodes, and the native API.
        let node_a = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let node_b = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let mut a = SessionFactory::new(node_a).session("root", "127.0.0.1");
        let mut b = SessionFactory::new(node_b).session("root", "127.0.0.1");
        ok(&mut a, "CREATE DATABASE v; USE v").await;
        ok(&mut b, "USE v").await;
        ok(&mut a, "CREATE TABLE t (id INT PRIMARY KEY, x INT)").await;
        ok(&mut a, "INSERT INTO t VALUES (1, 10)").await;
        let select = "SELECT * FROM t WHERE id = ?";
        let insert = "INSERT INTO t (id, x) VALUES (?, ?)";
        assert_eq!(a.prepare(select).await.expect("prepares").len(), 2);
        let one = |o: Outcome| texts(o, select);
        assert_eq!(
            one(execute(&mut a, select, &["1"]).await.unwrap()),
            vec![r(&["1", "10"])]
        );

        // Node B recreates the table with another column: node A's next
        // execution answers the new columns, not an error.
        ok(&mut b, "DROP TABLE t").await;
        ok(
            &mut b,
            "CREATE TABLE t (id INT PRIMARY KEY, x INT, y VARCHAR(8))",
        )
        .await;
        ok(&mut b, "INSERT INTO t VALUES (1, 11, 'new')").await;
        assert_eq!(
            one(execute(&mut a, select, &["1"]).await.unwrap()),
            vec![r(&["1", "11", "new"])]
        );

        // Node B adds a unique index: node A's prepared INSERT keeps it.
        ok(&mut b, "ALTER TABLE t ADD UNIQUE INDEX by_x (x)").await;
        let e = execute(&mut a, insert, &["2", "11"]).await.unwrap_err();
        assert!(e.contains("1062"), "{e}");
        execute(&mut a, insert, &["2", "12"]).await.unwrap();

        // The native API replaces the table: node A follows again.
        native.drop_table("v.t").await.unwrap();
        let def = TableDef::new(
            "v.t",
            vec![
                ColumnDef::new("id", ColumnType::Int { unsigned: false }),
                ColumnDef::new("z", ColumnType::BigInt { unsigned: false }).nullable(),
            ],
            &["id"],
        )
        .unwrap();
        native.create_table(def).await.unwrap();
        // Node B cached the table of three columns: SHOW reads mgmd's, and
        // an INSERT of two values, refused on the cached definition (1136),
        // is checked against mgmd's and runs.
        assert_eq!(column(&mut b, "SHOW COLUMNS FROM t").await, vec!["id", "z"]);
        ok(&mut b, "INSERT INTO t VALUES (1, 7)").await;
        assert_eq!(
            one(execute(&mut a, select, &["1"]).await.unwrap()),
            vec![r(&["1", "7"])]
        );
        let e = execute(&mut a, insert, &["3", "1"]).await.unwrap_err();
        assert!(
            e.contains("1054") && e.contains('x'),
            "no column x any more: {e}"
        );
        // Inside a transaction too: the unknown column of a stale cache is
        // checked before it is reported.
        ok(&mut a, "BEGIN").await;
        ok(&mut a, "SELECT * FROM t").await;
        ok(&mut b, "ALTER TABLE t ADD INDEX by_z (z)").await;
        native.drop_table("v.t").await.unwrap();
        ok(
            &mut b,
            "CREATE TABLE t (id INT PRIMARY KEY, z BIGINT, w INT)",
        )
        .await;
        ok(&mut a, "INSERT INTO t (id, w) VALUES (5, 50)").await;
        ok(&mut a, "COMMIT").await;
        assert_eq!(
            rows(&mut b, "SELECT id, w FROM t").await,
            vec![r(&["5", "50"])]
        );
        // A value refused on the cached definition (too long for the old
        // VARCHAR(8)) is checked against mgmd's too; so are PREPARE and
        // EXPLAIN of a column the cached definition lacks.
        let recreate =
            |columns: &str| format!("DROP TABLE t; CREATE TABLE t (id INT PRIMARY KEY, {columns})");
        ok(&mut b, &recreate("s VARCHAR(8)")).await;
        ok(&mut a, "INSERT INTO t VALUES (1, 'abc')").await;
        ok(&mut b, &recreate("s VARCHAR(64)")).await;
        ok(&mut a, "INSERT INTO t VALUES (2, 'twenty characters long')").await;
        ok(&mut b, &recreate("s VARCHAR(64), extra INT")).await;
        assert_eq!(
            a.prepare("SELECT extra FROM t WHERE id = ?")
                .await
                .expect("prepares")
                .len(),
            1
        );
        ok(&mut b, &recreate("s VARCHAR(64), more INT")).await;
        assert_eq!(rows(&mut a, "EXPLAIN SELECT more FROM t").await.len(), 1);
        // Dropped: 1146, on the next use.
        ok(&mut b, "DROP TABLE t").await;
        let e = execute(&mut a, select, &["1"]).await.unwrap_err();
        assert!(e.contains("1146"), "{e}");
    });
}

#[test]
fn warnings_are_kept_shown_and_counted() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let factory = SessionFactory::new(native.clone());
        let mut s = factory.session("root", "127.0.0.1");
        assert!(warnings(&mut s).await.is_empty());
        ok(&mut s, "CREATE DATABASE w; USE w").await;

        // IF [NOT] EXISTS of something missing or present: MySQL's notes.
        assert_eq!(ok_counted(&mut s, "DROP TABLE IF EXISTS nope, w.nada").await, 2);
        assert_eq!(
            warnings(&mut s).await,
            vec![
                ("Note".to_string(), 1051, "Unknown table 'w.nope'".to_string()),
                ("Note".to_string(), 1051, "Unknown table 'w.nada'".to_string()),
            ]
        );
        // SHOW WARNINGS and SELECT @@warning_count do not clear the list.
        assert_eq!(warning_count(&mut s).await, 2);
        assert_eq!(codes(&mut s).await, vec![1051, 1051]);
        assert_eq!(column(&mut s, "SHOW WARNINGS LIMIT 1").await, vec!["Note"]);
        assert_eq!(rows(&mut s, "SHOW WARNINGS LIMIT 1, 5").await.len(), 1);
        assert!(rows(&mut s, "SHOW ERRORS").await.is_empty());
        assert_eq!(numbers(&mut s, "SELECT @@error_count").await, vec![0]);
        assert_eq!(ok_counted(&mut s, "DROP DATABASE IF EXISTS nowhere").await, 1);
        assert_eq!(codes(&mut s).await, vec![1008]);
        assert_eq!(ok_counted(&mut s, "CREATE DATABASE IF NOT EXISTS w").await, 1);
        assert_eq!(codes(&mut s).await, vec![1007]);
        ok(&mut s, "CREATE TABLE t (id INT PRIMARY KEY, u INT, d DECIMAL(6,2), UNIQUE KEY by_u (u))").await;
        // A statement without warnings clears the list.
        assert_eq!(warning_count(&mut s).await, 0);
        assert_eq!(ok_counted(&mut s, "CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)").await, 1);
        assert_eq!(
            warnings(&mut s).await,
            vec![("Note".to_string(), 1050, "Table 't' already exists".to_string())]
        );
        assert_eq!(ok_counted(&mut s, "INSERT INTO t VALUES (1, 1, 1)").await, 0);
        assert!(warnings(&mut s).await.is_empty());

        // INSERT IGNORE: a warning per skipped row, naming the key.
        let skipped = ok_counted(
            &mut s,
            "INSERT IGNORE INTO t VALUES (1, 5, 0), (2, 1, 0), (3, 3, 0), (4, 3, 0)",
        )
        .await;
        assert_eq!(skipped, 3);
        assert_eq!(
            warnings(&mut s).await,
            vec![
                ("Warning".to_string(), 1062, "Duplicate entry '1' for key 'PRIMARY'".to_string()),
                ("Warning".to_string(), 1062, "Duplicate entry '1' for key 'by_u'".to_string()),
                ("Warning".to_string(), 1062, "Duplicate entry '3' for key 'by_u'".to_string()),
            ]
        );
        assert_eq!(numbers(&mut s, "SELECT COUNT(*) FROM t").await, vec![2]);
        // A SELECT of a table clears the list.
        rows(&mut s, "SELECT * FROM t").await;
        assert_eq!(warning_count(&mut s).await, 0);

        // DECIMAL values rounded into the column's scale: notes per row.
        assert_eq!(
            ok_counted(&mut s, "INSERT INTO t VALUES (10, 10, 1.005), (11, 11, 2.5), (12, 12, 3.14159)").await,
            2
        );
        assert_eq!(
            warnings(&mut s).await,
            vec![
                ("Note".to_string(), 1265, "Data truncated for column 'd' at row 1".to_string()),
                ("Note".to_string(), 1265, "Data truncated for column 'd' at row 3".to_string()),
            ]
        );
        assert_eq!(
            column(&mut s, "SELECT d FROM t WHERE id >= 10 ORDER BY id").await,
            vec!["1.01", "2.50", "3.14"]
        );
        assert_eq!(ok_counted(&mut s, "UPDATE t SET d = 9.999 WHERE id = 10").await, 1);
        assert_eq!(codes(&mut s).await, vec![1265]);
        assert_eq!(
            column(&mut s, "SELECT d FROM t WHERE id = 10").await,
            vec!["10.00"]
        );
        // A lookup that converts a value notes nothing.
        rows(&mut s, "SELECT id FROM t WHERE d = 3.141").await;
        assert_eq!(warning_count(&mut s).await, 0);
        // With @@sql_notes off, notes are not recorded (MySQL's switch).
        ok(&mut s, "SET sql_notes = 0").await;
        assert_eq!(ok_counted(&mut s, "DROP TABLE IF EXISTS nope").await, 0);
        ok(&mut s, "SET sql_notes = 1").await;

        // Collations other than utf8mb4_bin are accepted with a warning.
        assert_eq!(
            ok_counted(
                &mut s,
                "CREATE TABLE c (id INT PRIMARY KEY, s VARCHAR(10) COLLATE utf8mb4_general_ci) COLLATE=utf8mb4_unicode_ci"
            )
            .await,
            2
        );
        let collation = warnings(&mut s).await;
        assert_eq!(collation.len(), 2, "{collation:?}");
        assert!(collation.iter().all(|(level, code, message)| level == "Warning"
            && *code == 1273
            && message.contains("utf8mb4_bin")));
        assert_eq!(ok_counted(&mut s, "CREATE TABLE c2 (id INT PRIMARY KEY) COLLATE utf8mb4_bin").await, 0);
        assert_eq!(ok_counted(&mut s, "SET NAMES utf8mb4 COLLATE utf8mb4_0900_ai_ci").await, 1);
        assert!(warnings(&mut s).await[0].2.contains("utf8mb4_0900_ai_ci"));
        assert_eq!(ok_counted(&mut s, "SET NAMES utf8mb4").await, 0);

        // An error shows as level Error, and counts in @@error_count.
        let e = err_code(&mut s, "SELECT * FROM no_such_table", 1146).await;
        assert_eq!(
            warnings(&mut s).await,
            vec![("Error".to_string(), 1146, e.message.clone())]
        );
        assert_eq!(rows(&mut s, "SHOW ERRORS").await.len(), 1);
        assert_eq!(numbers(&mut s, "SHOW COUNT(*) ERRORS").await, vec![1]);
        assert_eq!(numbers(&mut s, "SELECT @@error_count, @@warning_count").await, vec![1]);
        // A multi-statement string: the list is the last statement's.
        ok(&mut s, "DROP TABLE IF EXISTS x1; DROP TABLE IF EXISTS x2, x3").await;
        assert_eq!(warning_count(&mut s).await, 2);
        ok(&mut s, "DELETE FROM t WHERE id = 999").await;
        assert_eq!(warning_count(&mut s).await, 0);

        // The list keeps 64 conditions (max_error_count) and counts all.
        let many: Vec<String> = (0..70).map(|i| format!("gone{i}")).collect();
        let sql = format!("DROP TABLE IF EXISTS {}", many.join(", "));
        assert_eq!(ok_counted(&mut s, &sql).await, 70);
        assert_eq!(warnings(&mut s).await.len(), 64);
        assert_eq!(warning_count(&mut s).await, 70);
        err_code(&mut s, "SHOW WARNINGS LIMIT x", 1064).await;
    });
}

/// `mariadb --show-warnings` runs SHOW WARNINGS after a statement only
/// when the OK packet counted warnings: what it prints is the protocol's
/// count and the list agreeing.
#[test]
fn the_mariadb_client_shows_the_warnings_its_ok_packet_counts() {
    let cluster = TestCluster::start();
    let sql = start_sql(&cluster);
    let p = sql.port;
    query(
        p,
        None,
        "CREATE DATABASE shop; CREATE TABLE shop.t (id INT PRIMARY KEY, d DECIMAL(5,1))",
    );
    let shown = |statement: &str| {
        let out = Command::new("mariadb")
            .args(["--protocol=tcp", "-h", "127.0.0.1", "-P", &p.to_string()])
            .args([
                "-u",
                "root",
                "--batch",
                "--skip-column-names",
                "--show-warnings",
            ])
            .args(["-D", "shop", "-e", statement])
            .output()
            .expect("run the mariadb client");
        assert!(out.status.success(), "{statement}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(shown("INSERT INTO t VALUES (1, 1)"), "");
    let out = shown("INSERT IGNORE INTO t VALUES (1, 2), (2, 2.25)");
    assert!(
        out.contains("Warning (Code 1062): Duplicate entry '1' for key 'PRIMARY'"),
        "{out}"
    );
    assert!(
        out.contains("Note (Code 1265): Data truncated for column 'd' at row 2"),
        "{out}"
    );
    let out = shown("DROP TABLE IF EXISTS nope");
    assert!(
        out.contains("Note (Code 1051): Unknown table 'shop.nope'"),
        "{out}"
    );
    assert_eq!(
        query(
            p,
            Some("information_schema"),
            "SELECT table_name, engine FROM tables WHERE table_schema = 'shop'"
        ),
        "t\tndbcluster\n"
    );
}
