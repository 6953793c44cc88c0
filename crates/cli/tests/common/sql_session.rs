//! Driving an in-process SQL session (`shoal_sql::Session`, no wire) in
//! tests: run statements, expect success or a MySQL error code, read rows
//! as the `mariadb` client shows them.

use shoal_sql::handler::Execution;
use shoal_sql::{Outcome, Session, SqlError};
use std::sync::Arc;

/// Rows as text (`None` for NULL).
pub type Rows = Vec<Vec<Option<String>>>;

pub async fn run(s: &mut Session, sql: &str) -> Vec<Result<Outcome, SqlError>> {
    s.run_collected(sql).await
}

/// Runs `sql`; every statement must succeed; the last outcome.
pub async fn ok(s: &mut Session, sql: &str) -> Outcome {
    let mut out = run(s, sql).await;
    for r in &out {
        if let Err(e) = r {
            panic!("{sql}: {e}");
        }
    }
    out.pop().expect("an outcome").unwrap()
}

/// A `COM_STMT_EXECUTE` of `sql`, its `?` replaced by `literals`.
pub fn execution(sql: &str, literals: &[&str]) -> Execution {
    Execution {
        template: Arc::from(sql),
        parts: sql
            .split('?')
            .map(str::to_string)
            .collect::<Vec<_>>()
            .into(),
        literals: literals.iter().map(|l| l.to_string()).collect(),
    }
}

/// Affected rows of an OK.
pub async fn affected(s: &mut Session, sql: &str) -> u64 {
    match ok(s, sql).await {
        Outcome::Ok { affected_rows, .. } => affected_rows,
        other => panic!("{sql}: expected an OK, got {other:?}"),
    }
}

/// The OK packet's last insert id.
pub async fn insert_id(s: &mut Session, sql: &str) -> u64 {
    match ok(s, sql).await {
        Outcome::Ok { last_insert_id, .. } => last_insert_id,
        other => panic!("{sql}: expected an OK, got {other:?}"),
    }
}

/// The rows of a result set, as text.
pub fn texts(o: Outcome, sql: &str) -> Rows {
    match o {
        Outcome::Rows { rows, .. } => rows
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned()))
                    .collect()
            })
            .collect(),
        other => panic!("{sql}: expected rows, got {other:?}"),
    }
}

pub async fn rows(s: &mut Session, sql: &str) -> Rows {
    let o = ok(s, sql).await;
    texts(o, sql)
}

/// The first column of every row ("NULL" for NULL).
pub async fn column(s: &mut Session, sql: &str) -> Vec<String> {
    rows(s, sql)
        .await
        .into_iter()
        .map(|r| r[0].clone().unwrap_or_else(|| "NULL".into()))
        .collect()
}

/// The first column of every row, as numbers.
pub async fn numbers(s: &mut Session, sql: &str) -> Vec<u64> {
    rows(s, sql)
        .await
        .into_iter()
        .map(|r| r[0].as_deref().expect("a value").parse().expect("a number"))
        .collect()
}

/// The error the last statement of `sql` ends with.
pub async fn err(s: &mut Session, sql: &str) -> SqlError {
    match run(s, sql).await.pop().expect("a result") {
        Err(e) => e,
        Ok(o) => panic!("{sql}: expected an error, got {o:?}"),
    }
}

/// The error, which must be MySQL error `code`.
pub async fn err_code(s: &mut Session, sql: &str, code: u16) -> SqlError {
    let e = err(s, sql).await;
    assert_eq!(e.code, code, "{sql}: {e}");
    e
}

/// A row written as the `mariadb` client shows it ("NULL" for NULL).
pub fn r(cells: &[&str]) -> Vec<Option<String>> {
    cells
        .iter()
        .map(|c| (*c != "NULL").then(|| c.to_string()))
        .collect()
}

/// A small seeded generator (xorshift): the tests need no crate for it.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }
}

pub fn sql_opt(v: Option<i64>) -> String {
    v.map_or("NULL".into(), |v| v.to_string())
}
