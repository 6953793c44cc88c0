//! Grouping in the SQL node's SELECT over real processes on 127.0.0.1:
//! sessions (`shoal_sql::Session`, no wire) on a cluster of mgmd and a
//! data node. Covers every aggregate (with and without DISTINCT) and the
//! texts and column types MariaDB 10.11 gives them, GROUP BY by
//! expression, position and alias with NULL as one group sorted first,
//! HAVING (aggregates not selected, aliases, without GROUP BY), SELECT
//! DISTINCT, empty inputs, ORDER BY and LIMIT over groups, aggregates in
//! expressions, the errors MySQL gives (1111, 1056, 1054, 1064, 1235),
//! sysbench's two grouping statements prepared and executed as the
//! protocol does, the memory bounds of grouping at tiny limits, and
//! random grouped queries checked against a model computed here.

mod common;

use common::sql_session::*;
use common::{runtime, TestCluster};
use shoal_client::Cluster;
use shoal_sql::exec::Limits;
use shoal_sql::{ColumnKind, Handler, Outcome, Session, SessionFactory};
use std::collections::{BTreeMap, BTreeSet};

fn rs(table: &[&[&str]]) -> Rows {
    table.iter().map(|row| r(row)).collect()
}

/// A prepared statement as the protocol runs it: prepared (its columns
/// described), then executed with `literals` for its `?`.
async fn prepared(s: &mut Session, sql: &str, literals: &[&str]) -> (Vec<ColumnKind>, Outcome) {
    let described = s
        .prepare(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut out = s.execute_collected(&execution(sql, literals)).await;
    let outcome = out
        .pop()
        .expect("an outcome")
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    if let Outcome::Rows { columns, .. } = &outcome {
        assert_eq!(
            columns.len(),
            described.len(),
            "{sql}: prepare and execute agree"
        );
        for (c, d) in columns.iter().zip(&described) {
            assert_eq!(c.kind, d.kind, "{sql}: column {}", c.name);
        }
    }
    (described.iter().map(|c| c.kind).collect(), outcome)
}

#[test]
fn grouping_answers_as_mariadb() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let factory = SessionFactory::new(native.clone());
        let mut s = factory.session("root", "127.0.0.1");
        ok(&mut s, "CREATE DATABASE g; USE g").await;
        ok(
            &mut s,
            "CREATE TABLE t (id INT PRIMARY KEY, k INT, s VARCHAR(10), f DOUBLE, u BIGINT UNSIGNED, KEY by_k (k))",
        )
        .await;
        ok(
            &mut s,
            "INSERT INTO t VALUES
                (1, 10, 'a', 1.5, 1),
                (2, 20, 'b', 2.25, 2),
                (3, NULL, 'a', NULL, NULL),
                (4, 20, 'b', 0.25, 18446744073709551615),
                (5, 5, NULL, -1, 18446744073709551615),
                (6, NULL, NULL, NULL, 3)",
        )
        .await;

        // --- Every aggregate, its text and its type.
        let sql = "SELECT COUNT(*), COUNT(k), SUM(k), MIN(k), MAX(k), AVG(k), SUM(f), AVG(f), MIN(s), MAX(s) FROM t";
        let o = ok(&mut s, sql).await;
        if let Outcome::Rows { columns, .. } = &o {
            let kinds: Vec<ColumnKind> = columns.iter().map(|c| c.kind).collect();
            use ColumnKind::*;
            assert_eq!(
                kinds,
                vec![LongLong, LongLong, NewDecimal, Long, Long, NewDecimal, Double, Double, VarString, VarString]
            );
            assert_eq!(columns[0].name, "COUNT(*)");
            assert!(!columns[0].nullable, "COUNT is never NULL");
            assert!(columns[2].nullable);
            assert_eq!((columns[2].decimals, columns[5].decimals), (0, 4));
            assert_eq!(columns[5].length, 16, "AVG(INT): DECIMAL(14,4)");
            assert_eq!(columns[2].length, 33, "SUM(INT): DECIMAL(32,0)");
        }
        assert_eq!(
            texts(o, sql),
            rs(&[&["6", "4", "55", "5", "20", "13.7500", "3", "0.75", "a", "b"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT COUNT(DISTINCT k), SUM(DISTINCT k), AVG(DISTINCT k), COUNT(DISTINCT s, k), MIN(DISTINCT k) FROM t").await,
            rs(&[&["3", "35", "11.6667", "2", "5"]])
        );
        // Integer sums past 64 bits are exact; MIN / MAX keep the type.
        let sql = "SELECT SUM(u), MAX(u), MIN(f), AVG(u) FROM t";
        let o = ok(&mut s, sql).await;
        if let Outcome::Rows { columns, .. } = &o {
            assert_eq!(columns[1].kind, ColumnKind::LongLong);
            assert!(columns[1].unsigned);
            assert_eq!(columns[2].kind, ColumnKind::Double);
        }
        assert_eq!(
            texts(o, sql),
            rs(&[&["36893488147419103236", "18446744073709551615", "-1", "7378697629483820647.2000"]])
        );
        // Aggregates inside expressions.
        assert_eq!(
            rows(&mut s, "SELECT SUM(k)+1, COUNT(*)*2, AVG(k)+1, MAX(k)-MIN(k), COUNT(*) > 5 FROM t").await,
            rs(&[&["56", "12", "14.7500", "15", "1"]])
        );
        // Without a table, aggregates see one row.
        assert_eq!(
            rows(&mut s, "SELECT COUNT(*), SUM(1), AVG(2)").await,
            rs(&[&["1", "1", "2.0000"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT COUNT(*), SUM(1) FROM DUAL WHERE 1 = 0").await,
            rs(&[&["0", "NULL"]])
        );

        // --- Empty inputs: one row without GROUP BY, none with it.
        assert_eq!(
            rows(&mut s, "SELECT COUNT(*), SUM(k), MIN(s), AVG(k), COUNT(DISTINCT k), MAX(f) FROM t WHERE id > 100").await,
            rs(&[&["0", "NULL", "NULL", "NULL", "0", "NULL"]])
        );
        assert!(rows(&mut s, "SELECT k, COUNT(*) FROM t WHERE id > 100 GROUP BY k").await.is_empty());
        assert!(rows(&mut s, "SELECT COUNT(*) FROM t WHERE id > 100 HAVING COUNT(*) > 0").await.is_empty());
        assert!(rows(&mut s, "SELECT DISTINCT k FROM t WHERE id > 100").await.is_empty());

        // --- GROUP BY: NULL is one group, sorted first.
        assert_eq!(
            rows(&mut s, "SELECT k, COUNT(*), SUM(f) FROM t GROUP BY k").await,
            rs(&[&["NULL", "2", "NULL"], &["5", "1", "-1"], &["10", "1", "1.5"], &["20", "2", "2.5"]])
        );
        // By position and by alias; by an expression.
        assert_eq!(
            rows(&mut s, "SELECT s, COUNT(*) FROM t GROUP BY 1").await,
            rs(&[&["NULL", "2"], &["a", "2"], &["b", "2"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT k % 2 AS parity, COUNT(*) FROM t GROUP BY parity").await,
            rs(&[&["NULL", "2"], &["0", "3"], &["1", "1"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT COUNT(*) FROM t GROUP BY k IS NULL, s").await,
            rs(&[&["1"], &["1"], &["2"], &["1"], &["1"]])
        );
        // A column neither grouped nor aggregated: a row of the group's.
        assert_eq!(
            rows(&mut s, "SELECT k, s FROM t WHERE k IS NOT NULL GROUP BY k").await,
            rs(&[&["5", "NULL"], &["10", "a"], &["20", "b"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT * FROM t WHERE id IN (2, 4) GROUP BY k").await.len(),
            1
        );

        // --- HAVING: aggregates not selected, aliases, none of GROUP BY.
        assert_eq!(
            rows(&mut s, "SELECT s FROM t GROUP BY s HAVING SUM(k) > 6").await,
            rs(&[&["a"], &["b"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT k, SUM(f) AS total FROM t GROUP BY k HAVING total > 0 AND COUNT(*) > 1").await,
            rs(&[&["20", "2.5"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT id AS x FROM t HAVING x > 4 ORDER BY x").await,
            rs(&[&["5"], &["6"]])
        );
        // A name both grouped and an alias is the grouped column.
        assert_eq!(
            rows(&mut s, "SELECT k, COUNT(*) AS k FROM t GROUP BY k HAVING k > 5").await,
            rs(&[&["10", "1"], &["20", "2"]])
        );

        // --- ORDER BY and LIMIT over groups.
        assert_eq!(
            rows(&mut s, "SELECT s, COUNT(*) AS n, SUM(k) FROM t GROUP BY s HAVING n > 1 ORDER BY s DESC").await,
            rs(&[&["b", "2", "40"], &["a", "2", "10"], &["NULL", "2", "5"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT k FROM t GROUP BY k ORDER BY COUNT(*) DESC, k").await,
            rs(&[&["NULL"], &["20"], &["5"], &["10"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT s, COUNT(*) FROM t GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1 OFFSET 1").await,
            rs(&[&["a", "2"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT k, COUNT(*) FROM t GROUP BY k LIMIT 2").await,
            rs(&[&["NULL", "2"], &["5", "1"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT k, SUM(k) AS total FROM t GROUP BY k ORDER BY total DESC LIMIT 2").await,
            rs(&[&["20", "40"], &["10", "10"]])
        );

        // --- DISTINCT.
        assert_eq!(
            rows(&mut s, "SELECT DISTINCT s FROM t ORDER BY s").await,
            rs(&[&["NULL"], &["a"], &["b"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT DISTINCT k, s FROM t WHERE k > 5 ORDER BY k DESC").await,
            rs(&[&["20", "b"], &["10", "a"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT DISTINCT COUNT(*) FROM t GROUP BY k ORDER BY 1").await,
            rs(&[&["1"], &["2"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT DISTINCT s FROM t ORDER BY s LIMIT 1 OFFSET 2").await,
            rs(&[&["b"]])
        );
        // utf8mb4_bin pads: 'c' and 'c ' are one value.
        ok(&mut s, "CREATE TABLE p (id INT PRIMARY KEY, s VARCHAR(10))").await;
        ok(&mut s, "INSERT INTO p VALUES (1, 'c'), (2, 'c '), (3, 'c  '), (4, 'd')").await;
        assert_eq!(
            rows(&mut s, "SELECT COUNT(*) FROM p GROUP BY s").await,
            rs(&[&["3"], &["1"]])
        );
        assert_eq!(rows(&mut s, "SELECT DISTINCT s FROM p").await.len(), 2);
        assert_eq!(
            rows(&mut s, "SELECT COUNT(DISTINCT s) FROM p").await,
            rs(&[&["2"]])
        );

        // --- Errors as MySQL's.
        err_code(&mut s, "SELECT SUM(SUM(k)) FROM t", 1111).await;
        err_code(&mut s, "SELECT id FROM t WHERE COUNT(*) > 1", 1111).await;
        err_code(&mut s, "UPDATE t SET k = SUM(k)", 1111).await;
        err_code(&mut s, "SELECT k FROM t GROUP BY SUM(k)", 1111).await;
        let e = err_code(&mut s, "SELECT COUNT(*) AS n FROM t GROUP BY n", 1056).await;
        assert!(e.message.contains("'n'"), "{e}");
        let e = err_code(&mut s, "SELECT k FROM t GROUP BY 3", 1054).await;
        assert!(e.message.contains("group statement"), "{e}");
        let e = err_code(&mut s, "SELECT k FROM t GROUP BY nope", 1054).await;
        assert!(e.message.contains("group statement"), "{e}");
        err_code(&mut s, "SELECT k FROM t GROUP BY k HAVING nope > 1", 1054).await;
        err_code(&mut s, "SELECT GROUP_CONCAT(s) FROM t", 1235).await;
        err_code(&mut s, "SELECT COUNT(k, s) FROM t", 1064).await;
        err_code(&mut s, "SELECT SUM(*) FROM t", 1064).await;
        err_code(&mut s, "SELECT k, COUNT(*) FROM t GROUP BY k WITH ROLLUP", 1235).await;

        // --- Prepared: described before any row, as executed.
        let (kinds, _) = prepared(&mut s, "SELECT k, COUNT(*), AVG(k), SUM(f) FROM t WHERE id > ? GROUP BY k HAVING COUNT(*) > ?", &["0", "1"]).await;
        assert_eq!(
            kinds,
            vec![ColumnKind::Long, ColumnKind::LongLong, ColumnKind::NewDecimal, ColumnKind::Double]
        );

        // --- Bounds: groups and DISTINCT values, by count and by bytes.
        let small = Limits {
            rows_max: 3,
            ..Limits::default()
        };
        let mut tiny = SessionFactory::new(native.clone()).with_limits(small).session("root", "127.0.0.1");
        ok(&mut tiny, "USE g").await;
        // Aggregates stream: more rows than rows_max is fine.
        assert_eq!(
            rows(&mut tiny, "SELECT COUNT(*), SUM(k) FROM t").await,
            rs(&[&["6", "55"]])
        );
        assert_eq!(rows(&mut tiny, "SELECT s FROM t GROUP BY s").await.len(), 3);
        for sql in [
            "SELECT id, COUNT(*) FROM t GROUP BY id",
            "SELECT DISTINCT id FROM t",
            "SELECT COUNT(DISTINCT id) FROM t",
            "SELECT s, COUNT(DISTINCT k) FROM t GROUP BY s",
            "SELECT id FROM t HAVING id > 0",
        ] {
            let e = err_code(&mut tiny, sql, 1038).await;
            assert!(e.message.contains("rows_max") && e.message.contains("WHERE"), "{sql}: {e}");
        }
        let narrow = Limits {
            group_bytes_max: 1000,
            ..Limits::default()
        };
        let mut tiny = SessionFactory::new(native.clone()).with_limits(narrow).session("root", "127.0.0.1");
        ok(&mut tiny, "USE g").await;
        assert_eq!(rows(&mut tiny, "SELECT COUNT(*) FROM t").await, rs(&[&["6"]]));
        let e = err_code(&mut tiny, "SELECT id, COUNT(*) FROM t GROUP BY id", 1038).await;
        assert!(e.message.contains("group_bytes_max"), "{e}");
        // The session goes on after the error.
        assert_eq!(rows(&mut tiny, "SELECT MAX(id) FROM t").await, rs(&[&["6"]]));
        ok(&mut s, "DROP DATABASE g").await;
    });
}

/// sysbench's oltp_read_only / read_write grouping statements, prepared
/// and executed with `?` bound, as the binary protocol runs them.
#[test]
fn sysbench_grouping_statements_prepared() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let mut s = SessionFactory::new(native).session("root", "127.0.0.1");
        ok(&mut s, "CREATE DATABASE sbtest; USE sbtest").await;
        ok(
            &mut s,
            "CREATE TABLE sbtest1 (id INTEGER NOT NULL, k INTEGER DEFAULT '0' NOT NULL,
                c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL,
                PRIMARY KEY (id), KEY k_1 (k))",
        )
        .await;
        let model: Vec<(i64, i64, String)> = (1..=40)
            .map(|id| (id, (id * 37) % 23, format!("{:011}-c", (id * 7) % 9)))
            .collect();
        let values: Vec<String> = model
            .iter()
            .map(|(id, k, c)| format!("({id}, {k}, '{c}', 'pad')"))
            .collect();
        ok(
            &mut s,
            &format!(
                "INSERT INTO sbtest1 (id, k, c, pad) VALUES {}",
                values.join(", ")
            ),
        )
        .await;
        for (lo, hi) in [(1, 40), (5, 14), (30, 30), (50, 60)] {
            let inside = model.iter().filter(|(id, _, _)| (lo..=hi).contains(id));
            let sum: i64 = inside.clone().map(|(_, k, _)| k).sum();
            let any = inside.clone().next().is_some();
            let (kinds, o) = prepared(
                &mut s,
                "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?",
                &[&lo.to_string(), &hi.to_string()],
            )
            .await;
            assert_eq!(kinds, vec![ColumnKind::NewDecimal]);
            let want = if any { sum.to_string() } else { "NULL".into() };
            assert_eq!(texts(o, "SUM"), rs(&[&[want.as_str()]]), "{lo}..{hi}");

            let distinct: BTreeSet<&str> = inside.map(|(_, _, c)| c.as_str()).collect();
            let (kinds, o) = prepared(
                &mut s,
                "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
                &[&lo.to_string(), &hi.to_string()],
            )
            .await;
            assert_eq!(kinds, vec![ColumnKind::String], "CHAR keeps its type");
            let want: Rows = distinct.iter().map(|c| r(&[c])).collect();
            assert_eq!(texts(o, "DISTINCT"), want, "{lo}..{hi}");
        }
        ok(&mut s, "DROP DATABASE sbtest").await;
    });
}

// ---------------------------------------------------------------------------
// Random grouped queries against a model

/// A row of the model table: `g`, `h`, `v` (all nullable).
type ModelRow = (Option<i64>, Option<&'static str>, Option<i64>);

const STRINGS: [Option<&str>; 5] = [Some("a"), Some("ab"), Some("b"), Some("B"), None];

/// A group's key in the model: NULL sorts first, as `Option` does.
type Key = (Option<i64>, Option<&'static str>);

/// `sum / n` with 4 fraction digits, rounded half away from zero (how
/// MariaDB shows AVG of integers), computed digit by digit.
fn avg_text(sum: i64, n: i64) -> String {
    let scaled = i128::from(sum) * 10_000;
    let n = i128::from(n);
    let mut q = scaled / n;
    if (scaled % n).abs() * 2 >= n {
        q += scaled.signum();
    }
    let sign = if q < 0 { "-" } else { "" };
    let q = q.abs();
    format!("{sign}{}.{:04}", q / 10_000, q % 10_000)
}

/// What the model's aggregates give for one group's `v` values.
fn aggregates(vs: &[Option<i64>]) -> Vec<Option<String>> {
    let present: Vec<i64> = vs.iter().flatten().copied().collect();
    let distinct: BTreeSet<i64> = present.iter().copied().collect();
    let sum: i64 = present.iter().sum();
    let some = |x: String| (!present.is_empty()).then_some(x);
    vec![
        Some(vs.len().to_string()),
        Some(present.len().to_string()),
        some(sum.to_string()),
        present.iter().min().map(i64::to_string),
        present.iter().max().map(i64::to_string),
        some(avg_text(sum, present.len().max(1) as i64)),
        Some(distinct.len().to_string()),
    ]
}

/// Random GROUP BY / HAVING / ORDER BY / LIMIT queries with every
/// aggregate, and DISTINCT queries, over a table changed at random, at
/// small limits; each checked against groups the model computes.
#[test]
fn grouped_results_agree_with_a_model() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let limits = Limits {
            result_bytes_max: 1 << 20,
            rows_max: 1000,
            group_bytes_max: 1 << 20,
            key_lookups_max: 4,
            batch_ops_max: 3,
            join_tables_max: 61,
            held_bytes_max: 256 << 20,
        };
        let mut s = SessionFactory::new(native)
            .with_limits(limits)
            .session("root", "127.0.0.1");
        ok(&mut s, "CREATE DATABASE m; USE m").await;
        ok(
            &mut s,
            "CREATE TABLE t (id INT PRIMARY KEY, g INT, h VARCHAR(4), v INT, KEY by_g (g), KEY by_gh (g, h))",
        )
        .await;
        let mut model: BTreeMap<i64, ModelRow> = BTreeMap::new();
        let mut rng = Rng(0x6A09_E667_F3BC_C908);
        for step in 0..600 {
            match rng.below(10) {
                0..=2 => {
                    let id = rng.below(80);
                    let row: ModelRow = (
                        (rng.below(6) > 0).then(|| rng.below(5)),
                        STRINGS[rng.below(5) as usize],
                        (rng.below(5) > 0).then(|| rng.below(101) - 50),
                    );
                    let h = row.1.map_or("NULL".into(), |x| format!("'{x}'"));
                    let sql = format!(
                        "REPLACE INTO t (id, g, h, v) VALUES ({id}, {}, {h}, {})",
                        sql_opt(row.0),
                        sql_opt(row.2)
                    );
                    ok(&mut s, &sql).await;
                    model.insert(id, row);
                }
                3 => {
                    let id = rng.below(80);
                    ok(&mut s, &format!("DELETE FROM t WHERE id = {id}")).await;
                    model.remove(&id);
                }
                _ => {
                    let (sql, want) = query(&mut rng, &model);
                    assert_eq!(rows(&mut s, &sql).await, want, "step {step}: {sql}");
                }
            }
        }
        ok(&mut s, "DROP DATABASE m").await;
    });
}

/// A WHERE as SQL text and as the model keeps rows (by id and row).
type RowFilter = (String, Box<dyn Fn(i64, &ModelRow) -> bool>);

/// A HAVING as SQL text and as the model keeps groups (by their `v`s).
type GroupFilter = (String, Box<dyn Fn(&[Option<i64>]) -> bool>);

/// A random grouped query and what the model says it returns.
fn query(rng: &mut Rng, model: &BTreeMap<i64, ModelRow>) -> (String, Rows) {
    // WHERE
    let c = rng.below(60) - 30;
    let (where_sql, keep): RowFilter = match rng.below(4) {
        0 => (String::new(), Box::new(|_, _| true)),
        1 => (
            format!(" WHERE v > {c}"),
            Box::new(move |_, r| r.2.is_some_and(|v| v > c)),
        ),
        2 => {
            let g = rng.below(5);
            (
                format!(" WHERE g = {g}"),
                Box::new(move |_, r| r.0 == Some(g)),
            )
        }
        _ => {
            let id = rng.below(80);
            (format!(" WHERE id < {id}"), Box::new(move |i, _| i < id))
        }
    };
    let rows: Vec<(&i64, &ModelRow)> = model.iter().filter(|(i, r)| keep(**i, r)).collect();
    if rng.below(5) == 0 {
        // SELECT DISTINCT over one or two columns.
        let both = rng.below(2) == 0;
        let sql = if both {
            format!("SELECT DISTINCT g, h FROM t{where_sql} ORDER BY g, h")
        } else {
            format!("SELECT DISTINCT h FROM t{where_sql} ORDER BY h DESC")
        };
        let want: Rows = if both {
            let set: BTreeSet<Key> = rows.iter().map(|(_, r)| (r.0, r.1)).collect();
            set.into_iter()
                .map(|(g, h)| vec![g.map(|g| g.to_string()), h.map(str::to_string)])
                .collect()
        } else {
            let set: BTreeSet<Option<&str>> = rows.iter().map(|(_, r)| r.1).collect();
            set.into_iter()
                .rev()
                .map(|h| vec![h.map(str::to_string)])
                .collect()
        };
        return (sql, want);
    }
    // GROUP BY none, g, h, or g and h.
    let keys = rng.below(4);
    let (key_cols, group_sql) = match keys {
        0 => ("", String::new()),
        1 => ("g, ", " GROUP BY g".to_string()),
        2 => ("h, ", " GROUP BY h".to_string()),
        _ => ("g, h, ", " GROUP BY g, h".to_string()),
    };
    let key_of = |r: &ModelRow| -> Key {
        match keys {
            0 => (None, None),
            1 => (r.0, None),
            2 => (None, r.1),
            _ => (r.0, r.1),
        }
    };
    let mut groups: BTreeMap<Key, Vec<Option<i64>>> = BTreeMap::new();
    for (_, r) in &rows {
        groups.entry(key_of(r)).or_default().push(r.2);
    }
    if keys == 0 {
        groups.entry((None, None)).or_default();
    }
    // HAVING
    let n = rng.below(4);
    let (having_sql, having): GroupFilter = match rng.below(4) {
        0 => (
            format!(" HAVING COUNT(*) > {n}"),
            Box::new(move |vs| vs.len() as i64 > n),
        ),
        1 => (
            format!(" HAVING cnt_v >= {n}"),
            Box::new(move |vs| vs.iter().flatten().count() as i64 >= n),
        ),
        2 => (
            " HAVING SUM(v) > 0".into(),
            Box::new(|vs| vs.iter().flatten().sum::<i64>() > 0 && vs.iter().any(Option::is_some)),
        ),
        _ => (String::new(), Box::new(|_| true)),
    };
    let mut out: Vec<(Key, Vec<Option<String>>, i64)> = Vec::new();
    for (key, vs) in &groups {
        if !having(vs) {
            continue;
        }
        let mut row = Vec::new();
        if keys == 1 || keys == 3 {
            row.push(key.0.map(|g| g.to_string()));
        }
        if keys >= 2 {
            row.push(key.1.map(str::to_string));
        }
        row.extend(aggregates(vs));
        out.push((*key, row, vs.len() as i64));
    }
    // ORDER BY: the groups' order, or the row count descending (ties in
    // the groups' order, named so the query says it).
    let key_order = match keys {
        0 => String::new(),
        1 => ", g".into(),
        2 => ", h".into(),
        _ => ", g, h".into(),
    };
    let order_sql = match rng.below(3) {
        0 => String::new(),
        1 => {
            out.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
            format!(" ORDER BY cnt DESC{key_order}")
        }
        _ => {
            let pos = key_cols.matches(',').count() + 3; // SUM(v)
                                                         // NULL sums sort first ascending: the model's Option order.
            let sum_of = |row: &Vec<Option<String>>| {
                row[pos - 1].as_ref().map(|t| t.parse::<i64>().unwrap())
            };
            out.sort_by(|a, b| sum_of(&a.1).cmp(&sum_of(&b.1)).then(a.0.cmp(&b.0)));
            format!(" ORDER BY {pos}{key_order}")
        }
    };
    // LIMIT
    let limit_sql = match rng.below(3) {
        0 => {
            let (l, o) = (rng.below(4), rng.below(3));
            out = out.into_iter().skip(o as usize).take(l as usize).collect();
            format!(" LIMIT {l} OFFSET {o}")
        }
        _ => String::new(),
    };
    let sql = format!(
        "SELECT {key_cols}COUNT(*) AS cnt, COUNT(v) AS cnt_v, SUM(v), MIN(v), MAX(v), AVG(v), COUNT(DISTINCT v) FROM t{where_sql}{group_sql}{having_sql}{order_sql}{limit_sql}"
    );
    (sql, out.into_iter().map(|(_, row, _)| row).collect())
}
