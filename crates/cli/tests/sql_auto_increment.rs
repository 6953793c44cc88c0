//! Cluster-wide AUTO_INCREMENT over real processes on 127.0.0.1: the
//! native API's counters (`Cluster::auto_increment_values` and friends:
//! disjoint ranges for two clients fetching at once, explicit values
//! raising the counter, restarts on DROP / TRUNCATE, the type's largest
//! value, the hidden system table) and SQL through `shoal_sql::Session`
//! (sysbench's table and a 2000-row insert, LAST_INSERT_ID(), explicit,
//! NULL and 0 ids, REPLACE, SHOW CREATE TABLE / DESCRIBE, 1075 and 1467,
//! two SQL nodes inserting at once, the counter across a restart of every
//! data node).

mod common;

use common::sql_session::*;
use common::{runtime, TestCluster};
use shoal_client::auto_increment::SEQUENCE_TABLE;
use shoal_client::{
    Cluster, ClusterOptions, ColumnDef, ColumnType, ErrorCode, ExecType, TableDef, Value,
};
use shoal_sql::{Outcome, Session, SessionFactory};
use std::collections::BTreeSet;
use std::time::Duration;

async fn last_insert_id(s: &mut Session) -> u64 {
    numbers(s, "SELECT LAST_INSERT_ID()").await[0]
}

/// sysbench's multi-row INSERT of `n` rows without ids.
fn sysbench_insert(table: &str, n: usize) -> String {
    let values: Vec<String> = (0..n)
        .map(|i| format!("({}, '{:0>119}', '{:0>59}')", i % 1000, i, i))
        .collect();
    format!("INSERT INTO {table}(k, c, pad) VALUES {}", values.join(","))
}

const SYSBENCH_TABLE: &str = "CREATE TABLE sbtest1(id INTEGER NOT NULL AUTO_INCREMENT, k INTEGER DEFAULT '0' NOT NULL, c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id)) /*! ENGINE = innodb */";

fn counted(name: &str, ty: ColumnType) -> TableDef {
    TableDef::new(
        name,
        vec![
            ColumnDef::new("id", ty).auto_increment(),
            ColumnDef::new("v", ColumnType::Int { unsigned: false }).nullable(),
        ],
        &["id"],
    )
    .unwrap()
}

async fn connect(addr: &str, prefetch: u64) -> Cluster {
    Cluster::connect_with(
        addr,
        ClusterOptions {
            auto_increment_prefetch: prefetch,
            ..ClusterOptions::default()
        },
    )
    .await
    .unwrap()
}

#[test]
fn native_counters_are_cluster_wide() {
    let cluster = TestCluster::start_nodes(2, 2, |_| {});
    let rt = runtime();
    rt.block_on(async {
        let a = connect(&cluster.mgmd_addr, 10).await;
        let b = connect(&cluster.mgmd_addr, 3).await;
        let t = a
            .create_table(counted("seq", ColumnType::Int { unsigned: true }))
            .await
            .unwrap();
        let tb = b.table("seq").await.unwrap();

        // Two clients fetching at once get disjoint values; each hands
        // out consecutive values from its range.
        let (mut seen_a, mut seen_b) = (Vec::new(), Vec::new());
        let fetch = |c: Cluster, t: shoal_client::Table, n: u64| async move {
            let mut got = Vec::new();
            for i in 0..40 {
                let v = c.auto_increment_values(&t, 1 + (i + n) % 5).await.unwrap();
                got.extend(v);
            }
            got
        };
        let (ga, gb) = tokio::join!(
            fetch(a.clone(), t.clone(), 0),
            fetch(b.clone(), tb.clone(), 2)
        );
        seen_a.extend(ga);
        seen_b.extend(gb);
        let all: BTreeSet<u64> = seen_a.iter().chain(&seen_b).copied().collect();
        assert_eq!(
            all.len(),
            seen_a.len() + seen_b.len(),
            "a value handed out twice"
        );
        assert!(seen_a.windows(2).all(|w| w[0] < w[1]), "{seen_a:?}");
        assert!(seen_b.windows(2).all(|w| w[0] < w[1]), "{seen_b:?}");
        assert_eq!(*all.iter().next().unwrap(), 1);
        // Four clients that fetch at every value, all at once: each
        // value is handed out exactly once, and none is skipped.
        let racers = [
            connect(&cluster.mgmd_addr, 1).await,
            connect(&cluster.mgmd_addr, 1).await,
            connect(&cluster.mgmd_addr, 1).await,
            connect(&cluster.mgmd_addr, 1).await,
        ];
        let race = a
            .create_table(counted("race", ColumnType::SmallInt { unsigned: false }))
            .await
            .unwrap();
        let take = |c: Cluster| async move {
            let t = c.table("race").await.unwrap();
            let mut got = Vec::new();
            for _ in 0..50 {
                got.extend(c.auto_increment_values(&t, 1).await.unwrap());
            }
            got
        };
        let (r0, r1, r2, r3) = tokio::join!(
            take(racers[0].clone()),
            take(racers[1].clone()),
            take(racers[2].clone()),
            take(racers[3].clone())
        );
        let mut every: Vec<u64> = r0.into_iter().chain(r1).chain(r2).chain(r3).collect();
        every.sort_unstable();
        assert_eq!(every, (1..=200).collect::<Vec<u64>>());
        assert_eq!(a.auto_increment_next(&race).await.unwrap(), 201);
        for r in &racers {
            r.close().await;
        }

        // One request larger than the prefetch is one range.
        let big = a.auto_increment_values(&t, 1000).await.unwrap();
        assert_eq!(big.len(), 1000);
        assert!(big.ranges().len() <= 2, "{:?}", big.ranges());

        // An explicit value raises the counter for every client.
        a.raise_auto_increment(&t, 10_000).await.unwrap();
        // b hands out what it cached before (fewer than its prefetch of
        // 3), then values above 10 000.
        let mut later_b: Vec<u64> = Vec::new();
        for _ in 0..5 {
            later_b.extend(b.auto_increment_values(&tb, 1).await.unwrap());
        }
        let old = later_b.iter().filter(|&&v| v <= 10_000).count();
        assert!(old < 3, "{later_b:?}");
        assert!(later_b[old..].iter().all(|&v| v > 10_000), "{later_b:?}");
        assert!(later_b.iter().all(|v| !all.contains(v)), "{later_b:?}");
        let next_a = a
            .auto_increment_values(&t, 1)
            .await
            .unwrap()
            .peek()
            .unwrap();
        assert!(next_a > 10_000, "{next_a}");
        // A value below what was seen costs nothing and changes nothing.
        a.raise_auto_increment(&t, 5).await.unwrap();
        assert_eq!(
            a.auto_increment_values(&t, 1).await.unwrap().peek(),
            Some(next_a + 1)
        );
        assert!(a.auto_increment_next(&t).await.unwrap() > next_a + 1);

        // TRUNCATE's reset and a drop restart the counter at 1; a new
        // table of the same name never inherits it.
        a.reset_auto_increment(&t).await.unwrap();
        assert_eq!(
            a.auto_increment_values(&t, 2)
                .await
                .unwrap()
                .collect::<Vec<_>>(),
            vec![1, 2]
        );
        a.drop_table("seq").await.unwrap();
        let t2 = a
            .create_table(counted("seq", ColumnType::Int { unsigned: true }))
            .await
            .unwrap();
        assert_ne!(t2.id(), t.id(), "table ids are not reused");
        assert_eq!(a.auto_increment_next(&t2).await.unwrap(), 1);
        b.invalidate_table("seq");
        let tb2 = b.table("seq").await.unwrap();
        assert_eq!(
            b.auto_increment_values(&tb2, 1).await.unwrap().peek(),
            Some(1)
        );

        // The type's largest value is the last one handed out.
        let tiny = a
            .create_table(counted("tiny", ColumnType::TinyInt { unsigned: false }))
            .await
            .unwrap();
        let v: Vec<u64> = a.auto_increment_values(&tiny, 127).await.unwrap().collect();
        assert_eq!(v, (1..=127).collect::<Vec<_>>());
        let e = a.auto_increment_values(&tiny, 1).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::BadValue, "{e}");
        assert!(e.detail.contains("exhausted"), "{e}");
        let e = b.table("tiny").await.unwrap();
        assert_eq!(
            b.auto_increment_values(&e, 1).await.unwrap_err().code,
            ErrorCode::BadValue
        );
        assert_eq!(
            a.raise_auto_increment(&tiny, 128).await.unwrap_err().code,
            ErrorCode::BadValue
        );
        let ubig = a
            .create_table(counted("ubig", ColumnType::BigInt { unsigned: true }))
            .await
            .unwrap();
        a.raise_auto_increment(&ubig, u64::MAX - 3).await.unwrap();
        let v: Vec<u64> = a.auto_increment_values(&ubig, 2).await.unwrap().collect();
        assert_eq!(v, vec![u64::MAX - 2, u64::MAX - 1]);
        assert!(a.auto_increment_values(&ubig, 1).await.is_err());

        // The rules of a definition.
        let two = TableDef::new(
            "two",
            vec![
                ColumnDef::new("a", ColumnType::Int { unsigned: false }).auto_increment(),
                ColumnDef::new("b", ColumnType::Int { unsigned: false }).auto_increment(),
            ],
            &["a"],
        );
        assert!(two.is_err());
        let unkeyed = TableDef::new(
            "unkeyed",
            vec![
                ColumnDef::new("a", ColumnType::Int { unsigned: false }),
                ColumnDef::new("b", ColumnType::Int { unsigned: false }).auto_increment(),
            ],
            &["a"],
        )
        .unwrap();
        let e = a.create_table(unkeyed.clone()).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::BadTableDefinition, "{e}");
        let mut keyed = unkeyed.with_index("by_b", &["b"]).unwrap();
        keyed.name = "keyed".into();
        a.create_table(keyed).await.unwrap();

        // The system table is nobody's to list, read, make or drop.
        let names: Vec<String> = a
            .tables()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert!(!names.iter().any(|n| n == SEQUENCE_TABLE), "{names:?}");
        assert!(names.iter().any(|n| n == "seq"), "{names:?}");
        assert_eq!(
            a.table(SEQUENCE_TABLE).await.unwrap_err().code,
            ErrorCode::NoSuchTable
        );
        assert_eq!(
            a.drop_table(SEQUENCE_TABLE).await.unwrap_err().code,
            ErrorCode::NoSuchTable
        );
        let fake = TableDef::new(
            SEQUENCE_TABLE,
            vec![ColumnDef::new("x", ColumnType::Int { unsigned: false })],
            &["x"],
        )
        .unwrap();
        assert_eq!(
            a.create_table(fake).await.unwrap_err().code,
            ErrorCode::BadTableDefinition
        );
        a.close().await;
        b.close().await;
    });
    cluster.verify_replicas();
}

#[test]
fn sql_auto_increment_as_mysql_has_it() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let factory = SessionFactory::new(native.clone());
        let mut s = factory.session("root", "127.0.0.1");
        ok(&mut s, "CREATE DATABASE sbtest; USE sbtest").await;

        // sysbench's table and bulk insert.
        ok(&mut s, SYSBENCH_TABLE).await;
        assert_eq!(last_insert_id(&mut s).await, 0);
        let first = insert_id(&mut s, &sysbench_insert("sbtest1", 2000)).await;
        assert_eq!(first, 1);
        assert_eq!(last_insert_id(&mut s).await, 1);
        let ids = numbers(&mut s, "SELECT id FROM sbtest1 ORDER BY id").await;
        assert_eq!(ids, (1..=2000).collect::<Vec<_>>());
        let k = rows(&mut s, "SELECT k, c FROM sbtest1 WHERE id = 1001").await;
        assert_eq!(k[0][0].as_deref(), Some("0"), "row 1001 is the 1001st row given");
        assert_eq!(insert_id(&mut s, &sysbench_insert("sbtest1", 3)).await, 2001);

        // DESCRIBE and SHOW CREATE TABLE.
        let desc = rows(&mut s, "DESCRIBE sbtest1").await;
        assert_eq!(desc[0][5].as_deref(), Some("auto_increment"), "{:?}", desc[0]);
        assert_eq!(desc[1][5].as_deref(), Some(""));
        let ddl = rows(&mut s, "SHOW CREATE TABLE sbtest1").await[0][1].clone().unwrap();
        assert!(ddl.contains("`id` int NOT NULL AUTO_INCREMENT"), "{ddl}");
        assert!(ddl.contains(") ENGINE=ndbcluster AUTO_INCREMENT=2004 DEFAULT CHARSET"), "{ddl}");

        // NULL, 0 and DEFAULT ask for a value; explicit values raise the
        // counter; statements that generate nothing leave LAST_INSERT_ID().
        ok(&mut s, "CREATE TABLE t (id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY, v INT)").await;
        let ddl = rows(&mut s, "SHOW CREATE TABLE t").await[0][1].clone().unwrap();
        assert!(!ddl.contains("AUTO_INCREMENT="), "a fresh counter is not shown: {ddl}");
        assert_eq!(insert_id(&mut s, "INSERT INTO t (v) VALUES (1)").await, 1);
        assert_eq!(insert_id(&mut s, "INSERT INTO t VALUES (NULL, 2), (0, 3), (DEFAULT, 4)").await, 2);
        assert_eq!(last_insert_id(&mut s).await, 2);
        assert_eq!(insert_id(&mut s, "INSERT INTO t VALUES (100, 5)").await, 100, "OK packet: the explicit id");
        assert_eq!(last_insert_id(&mut s).await, 2, "nothing generated: unchanged");
        assert_eq!(insert_id(&mut s, "INSERT INTO t (v) VALUES (6)").await, 101);
        assert_eq!(
            insert_id(&mut s, "INSERT INTO t VALUES (NULL, 7), (200, 8), (NULL, 9)").await,
            102
        );
        assert_eq!(
            numbers(&mut s, "SELECT id FROM t WHERE v = 9").await,
            vec![201],
            "a row after an explicit value gets a value above it"
        );
        ok(&mut s, "INSERT INTO t VALUES (50, 10)").await;
        assert_eq!(insert_id(&mut s, "INSERT INTO t (v) VALUES (11)").await, 202);
        ok(&mut s, "UPDATE t SET v = 12 WHERE id = 202").await;
        assert_eq!(last_insert_id(&mut s).await, 202);
        err_code(&mut s, "INSERT INTO t VALUES (202, 0)", 1062).await;

        // sql_mode NO_AUTO_VALUE_ON_ZERO stores 0.
        ok(&mut s, "SET sql_mode = 'STRICT_TRANS_TABLES,NO_AUTO_VALUE_ON_ZERO'").await;
        assert_eq!(insert_id(&mut s, "INSERT INTO t VALUES (0, 13)").await, 0);
        assert_eq!(numbers(&mut s, "SELECT v FROM t WHERE id = 0").await, vec![13]);
        assert_eq!(insert_id(&mut s, "INSERT INTO t VALUES (NULL, 14)").await, 203);
        ok(&mut s, "SET sql_mode = 'STRICT_TRANS_TABLES'").await;

        // REPLACE generates too, and replaces by an explicit id.
        assert_eq!(insert_id(&mut s, "REPLACE INTO t (v) VALUES (15)").await, 204);
        ok(&mut s, "REPLACE INTO t VALUES (204, 16)").await;
        assert_eq!(numbers(&mut s, "SELECT v FROM t WHERE id = 204").await, vec![16]);

        // INSERT IGNORE: a row skipped as a duplicate reports nothing
        // (its value is used up, as in MySQL); LAST_INSERT_ID() and the
        // OK packet take the first row that went in. (The duplicate is on
        // the primary key: IGNORE of a unique index's duplicate is not
        // there yet.)
        ok(&mut s, "CREATE TABLE ig (id INT NOT NULL AUTO_INCREMENT, u INT, PRIMARY KEY (u), KEY (id))").await;
        assert_eq!(insert_id(&mut s, "INSERT INTO ig (u) VALUES (5)").await, 1);
        assert_eq!(insert_id(&mut s, "INSERT IGNORE INTO ig (u) VALUES (5)").await, 0);
        assert_eq!(last_insert_id(&mut s).await, 1, "an ignored row leaves it unchanged");
        let id = insert_id(&mut s, "INSERT IGNORE INTO ig (u) VALUES (5), (6)").await;
        assert_eq!(numbers(&mut s, "SELECT id FROM ig WHERE u = 6").await, vec![id]);
        assert_eq!(id, 4, "the inserted row's value, not the ignored one's (3)");
        assert_eq!(last_insert_id(&mut s).await, 4);
        assert_eq!(affected(&mut s, "INSERT IGNORE INTO ig (u) VALUES (6), (5)").await, 0);
        assert_eq!(last_insert_id(&mut s).await, 4);

        // A rolled-back insert keeps its values used (as MySQL does).
        ok(&mut s, "BEGIN").await;
        assert_eq!(insert_id(&mut s, "INSERT INTO t (v) VALUES (17)").await, 205);
        ok(&mut s, "ROLLBACK").await;
        assert_eq!(insert_id(&mut s, "INSERT INTO t (v) VALUES (18)").await, 206);

        // TRUNCATE restarts at 1; AUTO_INCREMENT=n starts at n.
        ok(&mut s, "TRUNCATE TABLE t").await;
        assert_eq!(insert_id(&mut s, "INSERT INTO t (v) VALUES (19)").await, 1);
        ok(&mut s, "CREATE TABLE s (id INT NOT NULL AUTO_INCREMENT, name VARCHAR(10), KEY (id), PRIMARY KEY (name)) AUTO_INCREMENT=1000").await;
        assert_eq!(insert_id(&mut s, "INSERT INTO s (name) VALUES ('a'), ('b')").await, 1000);
        let ddl = rows(&mut s, "SHOW CREATE TABLE s").await[0][1].clone().unwrap();
        assert!(ddl.contains("AUTO_INCREMENT=1002"), "{ddl}");
        err_code(&mut s, "DROP INDEX id ON s", 1075).await;
        // ALTER TABLE ... AUTO_INCREMENT = n raises it; never lowers it.
        ok(&mut s, "ALTER TABLE s AUTO_INCREMENT = 5000").await;
        assert_eq!(insert_id(&mut s, "INSERT INTO s (name) VALUES ('c')").await, 5000);
        ok(&mut s, "ALTER TABLE s AUTO_INCREMENT = 10").await;
        assert_eq!(insert_id(&mut s, "INSERT INTO s (name) VALUES ('d')").await, 5001);
        ok(&mut s, "DROP TABLE s").await;
        ok(&mut s, "CREATE TABLE s (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(10))").await;
        assert_eq!(insert_id(&mut s, "INSERT INTO s (name) VALUES ('c')").await, 1, "a new table, a new counter");

        // Definitions MySQL refuses.
        err_code(&mut s, "CREATE TABLE bad1 (a INT AUTO_INCREMENT PRIMARY KEY, b INT AUTO_INCREMENT, KEY (b))", 1075).await;
        err_code(&mut s, "CREATE TABLE bad2 (a INT PRIMARY KEY, b INT AUTO_INCREMENT)", 1075).await;
        err_code(&mut s, "CREATE TABLE bad3 (a DOUBLE AUTO_INCREMENT PRIMARY KEY)", 1063).await;
        err_code(&mut s, "CREATE TABLE bad4 (a INT AUTO_INCREMENT DEFAULT 5 PRIMARY KEY)", 1067).await;
        ok(&mut s, "CREATE TABLE nul (a INT NULL AUTO_INCREMENT, b INT PRIMARY KEY, UNIQUE KEY (a))").await;
        let desc = rows(&mut s, "DESCRIBE nul").await;
        assert_eq!(desc[0][2].as_deref(), Some("NO"), "AUTO_INCREMENT columns are NOT NULL");

        // The type's end: 1467.
        ok(&mut s, "CREATE TABLE tiny (id TINYINT AUTO_INCREMENT PRIMARY KEY, v INT)").await;
        let many: Vec<String> = (0..127).map(|i| format!("({i})")).collect();
        ok(&mut s, &format!("INSERT INTO tiny (v) VALUES {}", many.join(","))).await;
        assert_eq!(
            numbers(&mut s, "SELECT id FROM tiny ORDER BY id DESC LIMIT 1").await,
            vec![127]
        );
        let e = err_code(&mut s, "INSERT INTO tiny (v) VALUES (1)", 1467).await;
        assert!(e.message.contains("Failed to read auto-increment value"), "{e}");

        // The system table is no table of SQL's.
        let tables: Vec<String> = rows(&mut s, "SHOW TABLES FROM shoal")
            .await
            .into_iter()
            .filter_map(|r| r[0].clone())
            .collect();
        assert!(!tables.iter().any(|t| t == SEQUENCE_TABLE), "{tables:?}");
        err_code(&mut s, &format!("SELECT * FROM shoal.`{SEQUENCE_TABLE}`"), 1146).await;
        err_code(&mut s, &format!("DROP TABLE shoal.`{SEQUENCE_TABLE}`"), 1051).await;
    });
}

/// Inserts `statements` multi-row inserts of `rows` rows each into
/// `app.t`; the ids the statements report first.
async fn insert_many(s: &mut Session, statements: usize, rows: usize) -> Vec<u64> {
    let mut firsts = Vec::new();
    for i in 0..statements {
        let values: Vec<String> = (0..rows).map(|r| format!("({})", i * rows + r)).collect();
        let sql = format!("INSERT INTO app.t (v) VALUES {}", values.join(","));
        firsts.push(insert_id(s, &sql).await);
    }
    firsts
}

#[test]
fn two_sql_nodes_inserting_at_once_never_collide() {
    let cluster = TestCluster::start_nodes(2, 2, |_| {});
    let rt = runtime();
    rt.block_on(async {
        // A small prefetch: many fetches, interleaved.
        let one = connect(&cluster.mgmd_addr, 4).await;
        let two = connect(&cluster.mgmd_addr, 4).await;
        let f1 = SessionFactory::new(one.clone());
        let f2 = SessionFactory::new(two.clone());
        let mut s1 = f1.session("root", "127.0.0.1");
        let mut s1b = f1.session("root", "127.0.0.1");
        let mut s2 = f2.session("root", "127.0.0.1");
        ok(&mut s1, "CREATE DATABASE app").await;
        ok(
            &mut s1,
            "CREATE TABLE app.t (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, v INT)",
        )
        .await;
        let (a, b, c) = tokio::join!(
            insert_many(&mut s1, 30, 3),
            insert_many(&mut s1b, 30, 1),
            insert_many(&mut s2, 30, 7)
        );
        let ids = numbers(&mut s2, "SELECT id FROM app.t ORDER BY id").await;
        let distinct: BTreeSet<u64> = ids.iter().copied().collect();
        assert_eq!(ids.len(), 30 * (3 + 1 + 7));
        assert_eq!(distinct.len(), ids.len());
        for first in a.iter().chain(&b).chain(&c) {
            assert!(distinct.contains(first), "{first}");
        }
        // LAST_INSERT_ID() is per session.
        assert_eq!(last_insert_id(&mut s1).await, *a.last().unwrap());
        assert_eq!(last_insert_id(&mut s2).await, *c.last().unwrap());
        one.close().await;
        two.close().await;
    });
    cluster.verify_replicas();
}

/// Stops every data node (SIGTERM: each waits until what it committed
/// is durable) and mgmd, then starts them again.
fn restart_all(cluster: &mut TestCluster) {
    let mut children: Vec<_> = cluster
        .datanodes
        .iter_mut()
        .filter_map(Option::take)
        .collect();
    for c in &children {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
        }
    }
    for c in &mut children {
        c.wait().expect("reap a data node");
    }
    cluster.kill_mgmd();
    cluster.start_mgmd();
    for id in 1..=cluster.datanodes.len() as u16 {
        let child = cluster.spawn_datanode(id);
        cluster.datanodes[id as usize - 1] = Some(child);
    }
    cluster.wait_started();
}

#[test]
fn the_counter_survives_a_restart_of_every_data_node() {
    let mut cluster = TestCluster::start_nodes(2, 2, |_| {});
    let rt = runtime();
    let before = rt.block_on(async {
        let c = connect(&cluster.mgmd_addr, 5).await;
        let mut s = SessionFactory::new(c.clone()).session("root", "127.0.0.1");
        ok(
            &mut s,
            "USE shoal; CREATE TABLE r (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v INT)",
        )
        .await;
        insert_id(&mut s, "INSERT INTO r (v) VALUES (1), (2), (3)").await;
        let t = c.table("r").await.unwrap();
        // A committed write after the counter's: both in durable epochs
        // once the nodes stop cleanly.
        let mut tx = c.transaction();
        tx.set_durable(true);
        tx.insert(&t.full_record(), &[Value::Int(-1), Value::Int(0)])
            .unwrap();
        tx.execute(ExecType::Commit).await.unwrap();
        let max = numbers(&mut s, "SELECT id FROM r ORDER BY id DESC LIMIT 1").await[0];
        c.close().await;
        max
    });
    restart_all(&mut cluster);
    rt.block_on(async {
        let c = connect(&cluster.mgmd_addr, 5).await;
        let mut s = SessionFactory::new(c.clone()).session("root", "127.0.0.1");
        let mut next = 0;
        for _ in 0..20 {
            match run(&mut s, "INSERT INTO shoal.r (v) VALUES (4)")
                .await
                .pop()
                .unwrap()
            {
                Ok(Outcome::Ok { last_insert_id, .. }) => {
                    next = last_insert_id;
                    break;
                }
                // The nodes may still settle after the restart.
                Err(e) if e.code == 1297 => tokio::time::sleep(Duration::from_millis(250)).await,
                other => panic!("{other:?}"),
            }
        }
        assert!(
            next > before,
            "the counter went back: {next} after {before}"
        );
        c.close().await;
    });
}
