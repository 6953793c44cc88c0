//! DATE, TIME and DECIMAL(p,s) end to end over real processes on
//! 127.0.0.1: sessions (`shoal_sql::Session`, no wire) on a cluster of
//! mgmd and a data node. Covers CREATE TABLE with the three types in the
//! primary key and in ordered indexes, DESCRIBE and SHOW CREATE TABLE,
//! INSERT / SELECT / UPDATE / DELETE, ordered range scans over each type,
//! MySQL's strict-mode errors (1292, 1264, 1366) and DDL errors (1425,
//! 1426, 1427), rounding into a column's scale, decimal arithmetic and
//! SUM / AVG / MIN / MAX over a DECIMAL column with their texts and
//! column types, the date functions, and the table read back through the
//! native API as `Value::Date`, `Value::Time` and `Value::Decimal`.

mod common;

use common::sql_session::*;
use common::{runtime, TestCluster};
use shoal_client::{Cluster, ColumnType, Decimal, ExecType, LockMode, Value};
use shoal_sql::{ColumnKind, Outcome, SessionFactory};

fn rs(table: &[&[&str]]) -> Rows {
    table.iter().map(|row| r(row)).collect()
}

fn days(y: i64, m: u32, d: u32) -> i32 {
    shoal_types::temporal::date_from_ymd(y, m, d).expect("a date")
}

#[test]
fn dates_times_and_decimals_end_to_end() {
    let cluster = TestCluster::start();
    let rt = runtime();
    rt.block_on(async {
        let native = Cluster::connect(&cluster.mgmd_addr).await.unwrap();
        let factory = SessionFactory::new(native.clone());
        let mut s = factory.session("root", "127.0.0.1");
        ok(&mut s, "CREATE DATABASE ty; USE ty").await;

        // --- DDL: the types, their spellings and their limits.
        ok(
            &mut s,
            "CREATE TABLE ev (
                d DATE NOT NULL,
                id INT NOT NULL,
                t TIME,
                price DECIMAL(7,2) NOT NULL DEFAULT '1.50',
                qty NUMERIC(5),
                f FIXED(4,1),
                plain DECIMAL,
                big DEC(38,10),
                PRIMARY KEY (d, id),
                KEY by_price (price),
                KEY by_t (t)
            )",
        )
        .await;
        let desc = rows(&mut s, "DESCRIBE ev").await;
        let types: Vec<&str> = desc.iter().map(|r| r[1].as_deref().unwrap()).collect();
        assert_eq!(
            types,
            vec!["date", "int", "time", "decimal(7,2)", "decimal(5,0)", "decimal(4,1)", "decimal(10,0)", "decimal(38,10)"]
        );
        assert_eq!(desc[0][3].as_deref(), Some("PRI"));
        assert_eq!(desc[3][4].as_deref(), Some("1.50"), "the default as text");
        let create = rows(&mut s, "SHOW CREATE TABLE ev").await;
        let ddl = create[0][1].clone().unwrap();
        for part in ["`d` date NOT NULL", "`t` time DEFAULT NULL", "`price` decimal(7,2) NOT NULL", "PRIMARY KEY (`d`,`id`)", "KEY `by_price` (`price`)"] {
            assert!(ddl.contains(part), "{part} in {ddl}");
        }
        err_code(&mut s, "CREATE TABLE bad (id INT PRIMARY KEY, x DECIMAL(39,2))", 1426).await;
        err_code(&mut s, "CREATE TABLE bad (id INT PRIMARY KEY, x DECIMAL(38,31))", 1425).await;
        err_code(&mut s, "CREATE TABLE bad (id INT PRIMARY KEY, x DECIMAL(5,6))", 1427).await;

        // --- Writes: strings and numbers convert as MySQL's strict mode.
        ok(
            &mut s,
            "INSERT INTO ev (d, id, t, price, qty, f, plain, big) VALUES
                ('2024-01-05', 1, '10:30:00', 12.5, 3, 1.25, 7, '12345678901234567890.0123456789'),
                ('2024-01-31', 2, '-01:15:00', -0.5, NULL, NULL, NULL, NULL),
                ('2024-02-01', 3, '838:59:59', 99999.99, 12345, -999.9, -1, -0.5),
                ('2023-12-31', 4, NULL, 1.235, 0, 0, 0, 0),
                ('2024-01-15', 5, '00:00:01', '0.01', 1, 2, 3, 4)",
        )
        .await;
        assert_eq!(
            rows(&mut s, "SELECT d, id, t, price, qty, f, plain, big FROM ev ORDER BY d, id").await,
            rs(&[
                &["2023-12-31", "4", "NULL", "1.24", "0", "0.0", "0", "0.0000000000"],
                &["2024-01-05", "1", "10:30:00", "12.50", "3", "1.3", "7", "12345678901234567890.0123456789"],
                &["2024-01-15", "5", "00:00:01", "0.01", "1", "2.0", "3", "4.0000000000"],
                &["2024-01-31", "2", "-01:15:00", "-0.50", "NULL", "NULL", "NULL", "NULL"],
                &["2024-02-01", "3", "838:59:59", "99999.99", "12345", "-999.9", "-1", "-0.5000000000"],
            ])
        );
        let e = err_code(&mut s, "INSERT INTO ev (d, id) VALUES ('2024-02-30', 9)", 1292).await;
        assert!(e.message.contains("Incorrect date value: '2024-02-30' for column 'd' at row 1"), "{e}");
        err_code(&mut s, "INSERT INTO ev (d, id, t) VALUES ('2024-03-01', 9, '839:00:00')", 1292).await;
        err_code(&mut s, "INSERT INTO ev (d, id) VALUES ('0999-12-31', 9)", 1292).await;
        let e = err_code(&mut s, "INSERT INTO ev (d, id, price) VALUES ('2024-03-01', 9, 100000)", 1264).await;
        assert!(e.message.contains("Out of range value for column 'price'"), "{e}");
        err_code(&mut s, "INSERT INTO ev (d, id, price) VALUES ('2024-03-01', 9, 99999.995)", 1264).await;
        err_code(&mut s, "INSERT INTO ev (d, id, price) VALUES ('2024-03-01', 9, 'abc')", 1366).await;
        assert_eq!(column(&mut s, "SELECT COUNT(*) FROM ev").await, vec!["5"]);

        // --- Range scans in order, by the primary key's DATE, an index's
        // DECIMAL and an index's TIME.
        assert_eq!(
            column(&mut s, "SELECT id FROM ev WHERE d BETWEEN '2024-01-01' AND '2024-01-31' ORDER BY d").await,
            vec!["1", "5", "2"]
        );
        assert_eq!(
            column(&mut s, "SELECT id FROM ev WHERE d >= DATE '2024-01-15' ORDER BY d DESC").await,
            vec!["3", "2", "5"]
        );
        assert_eq!(column(&mut s, "SELECT id FROM ev WHERE d = '2024-01-05'").await, vec!["1"]);
        assert_eq!(
            column(&mut s, "SELECT id FROM ev WHERE price > -1 AND price < 13 ORDER BY price").await,
            vec!["2", "5", "4", "1"]
        );
        assert_eq!(
            column(&mut s, "SELECT id FROM ev WHERE price = 12.5").await,
            vec!["1"]
        );
        assert_eq!(
            column(&mut s, "SELECT id FROM ev WHERE price = '1.24'").await,
            vec!["4"]
        );
        assert_eq!(
            column(&mut s, "SELECT id FROM ev WHERE t < '00:00:00' OR t > '100:00:00' ORDER BY t").await,
            vec!["2", "3"]
        );
        assert_eq!(
            column(&mut s, "SELECT id FROM ev WHERE t IS NOT NULL ORDER BY t DESC LIMIT 2").await,
            vec!["3", "1"]
        );

        // --- Aggregates over a DECIMAL column: exact, and typed as MariaDB.
        let sql = "SELECT SUM(price), AVG(price), MIN(price), MAX(price), SUM(qty), AVG(qty) FROM ev";
        let o = ok(&mut s, sql).await;
        if let Outcome::Rows { columns, .. } = &o {
            let kinds: Vec<ColumnKind> = columns.iter().map(|c| c.kind).collect();
            assert!(kinds.iter().all(|k| *k == ColumnKind::NewDecimal), "{kinds:?}");
            assert_eq!((columns[0].decimals, columns[1].decimals), (2, 6));
            assert_eq!((columns[2].decimals, columns[2].length), (2, 9));
        }
        assert_eq!(
            texts(o, sql),
            rs(&[&["100013.24", "20002.648000", "-0.50", "99999.99", "12349", "3087.2500"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT d < '2024-01-20', SUM(price) FROM ev GROUP BY d < '2024-01-20' ORDER BY 1").await,
            rs(&[&["0", "99999.49"], &["1", "13.75"]])
        );

        // --- Arithmetic stays exact.
        assert_eq!(
            rows(&mut s, "SELECT price * 2, price + 1, price - 0.005, price / 3, -price, price * qty FROM ev WHERE id = 1").await,
            rs(&[&["25.00", "13.50", "12.495", "4.166667", "-12.50", "37.50"]])
        );
        assert_eq!(
            rows(&mut s, "SELECT 0.1 + 0.2, 1.5 * 2, 10 / 4.0, CAST('3.14159' AS DECIMAL(5,2)), ROUND(price), ROUND(-2.5) FROM ev WHERE id = 1").await,
            rs(&[&["0.3", "3.0", "2.5000", "3.14", "13", "-3"]])
        );
        err_code(&mut s, "SELECT big * big * big FROM ev WHERE id = 1", 1690).await;

        // --- Dates and times in functions and comparisons.
        assert_eq!(
            rows(&mut s, "SELECT YEAR(d), MONTH(d), DAY(d), DATE('2024-03-09 10:11:12'), d = DATE(d) FROM ev WHERE id = 5").await,
            rs(&[&["2024", "1", "15", "2024-03-09", "1"]])
        );
        let today = column(&mut s, "SELECT CURDATE()").await;
        assert_eq!(today[0].len(), 10, "{today:?}");
        assert_eq!(column(&mut s, "SELECT CURRENT_DATE = DATE(NOW())").await, vec!["1"]);
        assert_eq!(column(&mut s, "SELECT LENGTH(CURTIME())").await, vec!["8"]);

        // --- UPDATE and DELETE by the new types.
        assert_eq!(affected(&mut s, "UPDATE ev SET price = price + 0.125, t = '11:00' WHERE d = '2024-01-05'").await, 1);
        assert_eq!(
            rows(&mut s, "SELECT price, t FROM ev WHERE id = 1").await,
            rs(&[&["12.63", "11:00:00"]])
        );
        assert_eq!(affected(&mut s, "DELETE FROM ev WHERE price < 0").await, 1);
        assert_eq!(affected(&mut s, "DELETE FROM ev WHERE t = '00:00:01'").await, 1);
        assert_eq!(column(&mut s, "SELECT id FROM ev ORDER BY id").await, vec!["1", "3", "4"]);

        // --- The table through the native API.
        let ev = native.table("ty.ev").await.unwrap();
        let col = |name: &str| ev.def().columns.iter().find(|c| c.name == name).unwrap().ty;
        assert_eq!(col("price"), ColumnType::Decimal { precision: 7, scale: 2 });
        assert_eq!(col("d"), ColumnType::Date);
        let rec = ev.record(&["d", "id", "t", "price", "big"]).unwrap();
        let mut tx = native.transaction();
        let read = tx
            .read(&rec, &[Value::Date(days(2024, 1, 5)), Value::Int(1)], LockMode::CommittedRead)
            .unwrap();
        tx.execute(ExecType::Commit).await.unwrap();
        let row = tx.row(read).unwrap();
        assert_eq!(row.get("t"), Some(Value::Time(11 * 3600 * 1_000_000)));
        assert_eq!(row.get("price"), Some(Value::Decimal(Decimal::new(1263, 2))));
        assert_eq!(
            row.get("big"),
            Some(Value::Decimal(Decimal::parse("12345678901234567890.0123456789").unwrap()))
        );
        // A native write with too many fraction digits is refused, one at
        // the column's scale is seen by SQL.
        let mut tx = native.transaction();
        let refused = tx.insert(
            &rec,
            &[Value::Date(days(2025, 6, 1)), Value::Int(7), Value::Null, Value::Decimal(Decimal::new(1234, 3)), Value::Null],
        );
        assert!(refused.is_err(), "{refused:?}");
        tx.insert(
            &rec,
            &[Value::Date(days(2025, 6, 1)), Value::Int(7), Value::Time(-1_000_000), Value::Decimal(Decimal::new(-25, 1)), Value::Null],
        )
        .unwrap();
        tx.execute(ExecType::Commit).await.unwrap();
        assert_eq!(
            rows(&mut s, "SELECT d, t, price FROM ev WHERE id = 7").await,
            rs(&[&["2025-06-01", "-00:00:01", "-2.50"]])
        );
    });
}
