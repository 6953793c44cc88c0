//! SQL accounts end to end: `shoal sql` processes on a real cluster, the
//! stock `mariadb` client logging in as root and as accounts root made,
//! with both login plugins; the accounts live in mgmd, so every SQL node
//! sees them, and they survive an mgmd restart.

mod common;

use common::sql_node::{fails, query, start_sql, stderr, stdout};
use common::{runtime, TestCluster};
use shoal_client::{AccountName, Cluster, ErrorCode, GrantLevel, Grants, UserAccount};
use shoal_sql::exec::users::stored;
use shoal_sql::protocol::PasswordHashes;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Runs `sql` as `user` with `password` (`None`: none given), with the
/// client's login plugin `plugin` (`None`: its default).
fn mariadb_as(
    port: u16,
    user: &str,
    password: Option<&str>,
    plugin: Option<&str>,
    database: Option<&str>,
    sql: &str,
) -> Output {
    let mut cmd = Command::new("mariadb");
    cmd.args(["--protocol=tcp", "-h", "127.0.0.1", "-P", &port.to_string()])
        .args(["-u", user, "--batch", "--skip-column-names"]);
    if let Some(p) = password {
        cmd.arg(format!("-p{p}"));
    }
    if let Some(p) = plugin {
        cmd.arg(format!("--default-auth={p}"));
    }
    if let Some(db) = database {
        cmd.args(["-D", db]);
    }
    cmd.args(["-e", sql])
        .output()
        .unwrap_or_else(|e| panic!("running the mariadb client: {e} (scripts/test.sh installs it)"))
}

fn ok_as(port: u16, user: &str, password: &str, database: Option<&str>, sql: &str) -> String {
    let out = mariadb_as(port, user, Some(password), None, database, sql);
    assert!(out.status.success(), "{user}: {sql}: {}", stderr(&out));
    stdout(&out)
}

fn fails_as(
    port: u16,
    user: &str,
    password: Option<&str>,
    database: Option<&str>,
    sql: &str,
    code: u16,
) -> String {
    let out = mariadb_as(port, user, password, None, database, sql);
    let err = stderr(&out);
    assert!(
        !out.status.success(),
        "{user}: {sql} succeeded: {}",
        stdout(&out)
    );
    assert!(
        err.contains(&format!("ERROR {code}")),
        "{user}: {sql}: {err}"
    );
    err
}

#[test]
fn accounts_made_through_one_sql_node_log_in_everywhere_with_their_grants() {
    let cluster = TestCluster::start_nodes(1, 1, |_| {});
    let one = start_sql(&cluster);
    let two = start_sql(&cluster);
    let (p1, p2) = (one.port, two.port);

    // A fresh cluster: root without a password, from 127.0.0.1.
    assert_eq!(
        query(p1, None, "SHOW GRANTS"),
        "GRANT ALL PRIVILEGES ON *.* TO `root`@`127.0.0.1` WITH GRANT OPTION\n"
    );
    query(
        p1,
        None,
        "CREATE DATABASE shop; CREATE DATABASE other; \
         CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(20)); \
         CREATE TABLE other.secrets (id INT PRIMARY KEY); \
         INSERT INTO other.secrets VALUES (1)",
    );
    query(
        p1,
        None,
        "CREATE USER 'app'@'%' IDENTIFIED BY 's3cret'; GRANT ALL PRIVILEGES ON shop.* TO 'app'@'%'",
    );

    // The other SQL node knows the account at once, with both plugins.
    for plugin in ["mysql_native_password", "caching_sha2_password"] {
        let out = mariadb_as(p2, "app", Some("s3cret"), Some(plugin), None, "SHOW GRANTS");
        assert!(out.status.success(), "{plugin}: {}", stderr(&out));
        assert_eq!(
            stdout(&out),
            "GRANT USAGE ON *.* TO `app`@`%`\nGRANT ALL PRIVILEGES ON `shop`.* TO `app`@`%`\n",
            "{plugin}"
        );
    }
    // Wrong, missing and other users' passwords: 1045, with either plugin.
    for plugin in [None, Some("caching_sha2_password")] {
        let out = mariadb_as(p2, "app", Some("wrong"), plugin, None, "SELECT 1");
        assert!(
            stderr(&out).contains("ERROR 1045") && stderr(&out).contains("using password: YES"),
            "{}",
            stderr(&out)
        );
    }
    let err = fails_as(p1, "app", None, None, "SELECT 1", 1045);
    assert!(err.contains("using password: NO"), "{err}");
    fails_as(p1, "nobody", Some("s3cret"), None, "SELECT 1", 1045);

    // What the account may use: its database, and information_schema.
    ok_as(
        p2,
        "app",
        "s3cret",
        Some("shop"),
        "INSERT INTO items VALUES (1, 'fig')",
    );
    assert_eq!(
        ok_as(p1, "app", "s3cret", None, "SELECT name FROM shop.items"),
        "fig\n"
    );
    // CURRENT_USER() names the account (its host pattern), USER() the
    // client's address.
    assert_eq!(
        ok_as(
            p1,
            "app",
            "s3cret",
            None,
            "SELECT CURRENT_USER(), USER(), CURRENT_USER"
        ),
        "app@%\tapp@127.0.0.1\tapp@%\n"
    );
    assert_eq!(
        ok_as(p1, "app", "s3cret", None, "SHOW DATABASES"),
        "information_schema\nshop\n"
    );
    let all = query(p1, None, "SHOW DATABASES");
    for db in ["other", "shop", "mysql", "information_schema"] {
        assert!(all.lines().any(|l| l == db), "{all}");
    }
    let err = fails_as(p1, "app", Some("s3cret"), Some("other"), "SELECT 1", 1044);
    assert!(
        err.contains("Access denied for user 'app'@'%' to database 'other'"),
        "{err}"
    );
    for sql in [
        "USE other",
        "SELECT * FROM other.secrets",
        "INSERT INTO other.secrets VALUES (2)",
        "DROP TABLE other.secrets",
        "SHOW TABLES FROM other",
        "DESCRIBE other.secrets",
        "CREATE TABLE other.t (id INT PRIMARY KEY)",
        "CREATE DATABASE mine",
        "DROP DATABASE other",
    ] {
        fails_as(p1, "app", Some("s3cret"), Some("shop"), sql, 1044);
    }
    for sql in [
        "CREATE USER x IDENTIFIED BY 'y'",
        "GRANT ALL ON other.* TO 'app'@'%'",
        "DROP USER 'app'@'%'",
    ] {
        fails_as(p1, "app", Some("s3cret"), None, sql, 1227);
    }
    fails_as(
        p1,
        "app",
        Some("s3cret"),
        None,
        "SHOW GRANTS FOR 'root'@'localhost'",
        1044,
    );
    // The account changes its own password; the old one stops working.
    ok_as(p2, "app", "s3cret", None, "SET PASSWORD = 'n3w'");
    fails_as(p1, "app", Some("s3cret"), None, "SELECT 1", 1045);
    assert_eq!(ok_as(p1, "app", "n3w", None, "SELECT 1"), "1\n");

    // Root's errors, as MySQL's.
    fails(p1, None, "CREATE USER 'app'@'%'", 1396);
    query(p1, None, "CREATE USER IF NOT EXISTS 'app'@'%'");
    fails(p1, None, "DROP USER 'ghost'@'%', 'app'@'%'", 1396);
    fails(p1, None, "ALTER USER 'ghost' IDENTIFIED BY 'x'", 1396);
    fails(p1, None, "GRANT ALL ON shop.* TO 'ghost'", 1410);
    fails(p1, None, "REVOKE ALL ON other.* FROM 'app'@'%'", 1141);
    fails(p1, None, "GRANT SELECT ON shop.* TO 'app'@'%'", 1235);
    fails(
        p1,
        None,
        "GRANT ALL ON information_schema.* TO 'app'@'%'",
        1044,
    );
    query(p1, None, "DROP USER IF EXISTS 'ghost'@'%'");
    // ALTER USER by a hash MySQL shows (SELECT PASSWORD('secret')).
    query(
        p1,
        None,
        "ALTER USER 'app'@'%' IDENTIFIED WITH mysql_native_password AS '*14E65567ABDB5135D0CFD9A70B3032C179A49EE7'",
    );
    assert_eq!(ok_as(p2, "app", "secret", None, "SELECT 1"), "1\n");
    // An account known only by its native hash still logs in with a
    // caching_sha2 client (switched to mysql_native_password).
    let out = mariadb_as(
        p2,
        "app",
        Some("secret"),
        Some("caching_sha2_password"),
        None,
        "SELECT 1",
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // A revoke holds for the next login, on every SQL node.
    query(p2, None, "REVOKE ALL PRIVILEGES ON shop.* FROM 'app'@'%'");
    fails_as(
        p1,
        "app",
        Some("secret"),
        None,
        "SELECT * FROM shop.items",
        1044,
    );
    assert_eq!(
        ok_as(p1, "app", "secret", None, "SHOW DATABASES"),
        "information_schema\n"
    );
    // ALL on *.* makes an administrator.
    query(p1, None, "GRANT ALL ON *.* TO 'app'@'%' WITH GRANT OPTION");
    ok_as(
        p2,
        "app",
        "secret",
        None,
        "CREATE USER 'helper'@'localhost' IDENTIFIED BY 'h'; SELECT COUNT(*) FROM other.secrets",
    );
    assert_eq!(ok_as(p1, "helper", "h", None, "SELECT 2"), "2\n");

    // Dropped: the next login fails on both nodes.
    query(p1, None, "DROP USER 'app'@'%', 'helper'@'localhost'");
    for port in [p1, p2] {
        fails_as(port, "app", Some("secret"), None, "SELECT 1", 1045);
        fails_as(port, "helper", Some("h"), None, "SELECT 1", 1045);
    }
    // Root gets a password: without it, root is refused.
    query(
        p1,
        None,
        "ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY 'rootpw'",
    );
    fails_as(p2, "root", None, None, "SELECT 1", 1045);
    assert_eq!(ok_as(p2, "root", "rootpw", None, "SELECT 3"), "3\n");
}

#[test]
fn accounts_survive_an_mgmd_restart() {
    let mut cluster = TestCluster::start_nodes(1, 1, |_| {});
    let sql = start_sql(&cluster);
    let p = sql.port;
    query(
        p,
        None,
        "CREATE DATABASE shop; CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY 'pw'; \
         GRANT ALL ON shop.* TO 'app'@'127.0.0.1'",
    );
    assert_eq!(ok_as(p, "app", "pw", None, "SELECT 1"), "1\n");

    cluster.kill_mgmd();
    // mgmd away: an account this SQL node has seen still logs in.
    assert_eq!(ok_as(p, "app", "pw", None, "SELECT 2"), "2\n");
    cluster.start_mgmd();

    // A new SQL node, which never saw the account, reads it from the
    // restarted mgmd (from its disk).
    let fresh = start_sql(&cluster);
    let since = Instant::now();
    loop {
        let out = mariadb_as(
            fresh.port,
            "app",
            Some("pw"),
            None,
            Some("shop"),
            "SHOW GRANTS",
        );
        if out.status.success() {
            assert_eq!(
                stdout(&out),
                "GRANT USAGE ON *.* TO `app`@`127.0.0.1`\nGRANT ALL PRIVILEGES ON `shop`.* TO `app`@`127.0.0.1`\n"
            );
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "app could not log in after mgmd restarted: {}\n{}",
            stderr(&out),
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // A change after the restart holds at once on the old SQL node too.
    query(fresh.port, None, "DROP USER 'app'@'127.0.0.1'");
    fails_as(p, "app", Some("pw"), None, "SELECT 1", 1045);
}

#[test]
fn the_native_api_sees_and_changes_the_same_accounts() {
    let cluster = TestCluster::start_nodes(1, 1, |_| {});
    let sql = start_sql(&cluster);
    let p = sql.port;
    query(
        p,
        None,
        "CREATE DATABASE shop; CREATE USER 'app'@'%' IDENTIFIED BY 'one'",
    );
    let rt = runtime();
    rt.block_on(async {
        let c = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        // Made through SQL: hashes only, the ones the SQL node computed.
        let app = c.users(Some("app")).await.unwrap();
        assert_eq!(app.len(), 1);
        assert_eq!(
            app[0].password,
            Some(stored(&PasswordHashes::of("one"))),
            "{app:?}"
        );
        c.set_password(
            AccountName::new("app", "%"),
            Some(stored(&PasswordHashes::of("two"))),
        )
        .await
        .unwrap();
        let mut grants = Grants::default();
        grants.databases.insert("shop".into());
        let native = UserAccount {
            user: "native".into(),
            host: "127.0.0.1".into(),
            password: Some(stored(&PasswordHashes::of("n"))),
            grants,
        };
        c.create_users(vec![native.clone()], false).await.unwrap();
        let err = c.create_users(vec![native], false).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::UserExists, "{err}");
        let err = c
            .revoke(vec![AccountName::new("app", "%")], GrantLevel::AllDatabases)
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::NoSuchGrant, "{err}");
        let names: Vec<AccountName> = c
            .users(None)
            .await
            .unwrap()
            .iter()
            .map(UserAccount::name)
            .collect();
        assert_eq!(
            names,
            vec![
                AccountName::new("app", "%"),
                AccountName::new("native", "127.0.0.1"),
                AccountName::new("root", "127.0.0.1"),
                AccountName::new("root", "localhost"),
            ]
        );
        c.close().await;
    });
    fails_as(p, "app", Some("one"), None, "SELECT 1", 1045);
    assert_eq!(ok_as(p, "app", "two", None, "SELECT 1"), "1\n");
    assert_eq!(
        ok_as(p, "native", "n", Some("shop"), "SHOW GRANTS"),
        "GRANT USAGE ON *.* TO `native`@`127.0.0.1`\nGRANT ALL PRIVILEGES ON `shop`.* TO `native`@`127.0.0.1`\n"
    );
}
