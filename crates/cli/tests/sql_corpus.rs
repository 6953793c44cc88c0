//! Shoal's SQL node against MariaDB: the statements under
//! `tests/corpus/` run, in order, on a Shoal cluster's SQL node and on a
//! private `mariadbd` (InnoDB), and every statement must come out the
//! same on both: the same result rows, or the same error code.
//!
//! The corpus: `*.sql` files, run in the order of their names, each a
//! list of statements ending with `;` at the end of a line (a statement
//! may span lines, which are joined with spaces, so a string literal must
//! not), with `--` comment lines between them. The first file makes and
//! fills the tables the others query. A comment line
//! `-- shoal-error: CODE why` before a statement says Shoal answers it
//! with error CODE where MariaDB answers otherwise (a feature Shoal does
//! not have yet, 1235); keep those few and say why.
//!
//! How outcomes compare: rows as the `mariadb` client prints them in
//! batch mode (tab-separated text, special characters escaped, `NULL`),
//! exactly and in order when the statement has an ORDER BY and as sorted
//! lists otherwise (a table scan's order is each server's own); errors by
//! code only (the messages are each server's own). Statements without a
//! result set (DDL, DML) compare by their error or its absence, and the
//! SELECTs after them show what they did.
//!
//! Both servers get the corpus through one `mariadb` client run each
//! (`--force`, so it goes on after errors), with a marker query after
//! every statement to cut the output into each statement's rows; the
//! client names the input line of every error, which names the
//! statement.

mod common;

use common::mariadb_server::MariaDbServer;
use common::sql_node::start_sql;
use common::TestCluster;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The corpus must keep at least this many SELECTs.
const QUERIES_MIN: usize = 200;

/// What a `-- shoal-error:` line starts with.
const SHOAL_ERROR: &str = "-- shoal-error:";

/// One corpus statement and where it is.
struct Statement {
    file: String,
    line: usize,
    sql: String,
    /// Shoal's error code where it knowingly differs from MariaDB.
    shoal_error: Option<u16>,
}

impl Statement {
    /// Whether the rows come in a defined order. No subquery or string
    /// literal in the corpus says ORDER BY (keep it so), so a plain
    /// search is enough.
    fn ordered(&self) -> bool {
        self.sql.to_ascii_uppercase().contains("ORDER BY")
    }

    fn is_query(&self) -> bool {
        self.sql
            .split_whitespace()
            .next()
            .is_some_and(|w| w.eq_ignore_ascii_case("SELECT"))
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Rows(Vec<String>),
    Error {
        code: u16,
        message: String,
    },
    /// No marker after the statement: the client stopped or lost its
    /// connection.
    Missing,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Rows(rows) if rows.is_empty() => write!(f, "no rows"),
            Outcome::Rows(rows) => {
                write!(f, "{} row(s):", rows.len())?;
                for r in rows {
                    write!(f, "\n        {r}")?;
                }
                Ok(())
            }
            Outcome::Error { code, message } => write!(f, "ERROR {code}: {message}"),
            Outcome::Missing => write!(f, "no outcome (the client stopped before it)"),
        }
    }
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Every statement of every corpus file, in order.
fn load_corpus() -> Vec<Statement> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/corpus")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    let mut all = Vec::new();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).expect("corpus file");
        all.extend(parse(&name, &text));
    }
    all
}

fn parse(file: &str, text: &str) -> Vec<Statement> {
    let mut out = Vec::new();
    let mut pending: Vec<&str> = Vec::new();
    let mut start = 0;
    let mut shoal_error = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if pending.is_empty() {
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix(SHOAL_ERROR) {
                let code = rest.split_whitespace().next().and_then(|c| c.parse().ok());
                assert!(code.is_some(), "{file}:{}: {SHOAL_ERROR} CODE why", i + 1);
                shoal_error = code;
                continue;
            }
            if line.starts_with("--") {
                continue;
            }
            start = i + 1;
        }
        pending.push(line);
        if line.ends_with(';') {
            out.push(Statement {
                file: file.to_string(),
                line: start,
                sql: pending.join(" "),
                shoal_error: shoal_error.take(),
            });
            pending.clear();
        }
    }
    assert!(
        pending.is_empty(),
        "{file}:{start}: a statement without its closing ';'"
    );
    assert!(
        shoal_error.is_none(),
        "{file}: {SHOAL_ERROR} without a statement after it"
    );
    out
}

fn marker(k: usize) -> String {
    format!("corpus-marker-{k}")
}

/// Runs the corpus through one `mariadb` client on `port`; each
/// statement's outcome. Statement k is line 2k+1 of the script, its
/// marker query line 2k+2.
fn run_corpus(port: u16, corpus: &[Statement], scratch: &Path, server: &str) -> Vec<Outcome> {
    let mut script = String::new();
    for (k, s) in corpus.iter().enumerate() {
        assert!(!s.sql.contains('\n'));
        script.push_str(&s.sql);
        script.push_str(&format!("\nSELECT '{}';\n", marker(k)));
    }
    let script_path = scratch.join(format!("corpus-{server}.sql"));
    std::fs::write(&script_path, script).expect("write the script");
    let out = Command::new("mariadb")
        .args(["--no-defaults", "--protocol=tcp", "-h", "127.0.0.1"])
        .args(["-P", &port.to_string(), "-u", "root"])
        .args(["--batch", "--skip-column-names", "--force"])
        .arg("--default-character-set=utf8mb4")
        .stdin(Stdio::from(
            std::fs::File::open(&script_path).expect("the script"),
        ))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "running the mariadb client: {e} (scripts/test.sh installs it: apt-get install \
                 mariadb-client)"
            )
        });
    let mut outcomes = vec![Outcome::Missing; corpus.len()];
    let mut rows = Vec::new();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut next = 0;
    for line in stdout.lines() {
        if line == marker(next) {
            outcomes[next] = Outcome::Rows(std::mem::take(&mut rows));
            next += 1;
        } else {
            rows.push(line.to_string());
        }
    }
    // "ERROR 1062 (23000) at line 9: Duplicate entry ..."; with --force
    // the client also echoes the failed statement between dashes.
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr.lines().filter(|l| l.starts_with("ERROR ")) {
        let parsed = line
            .strip_prefix("ERROR ")
            .and_then(|r| r.split_once(' '))
            .and_then(|(code, r)| {
                let (_, r) = r.split_once(" at line ")?;
                let (at, message) = r.split_once(": ")?;
                Some((
                    code.parse::<u16>().ok()?,
                    at.parse::<usize>().ok()?,
                    message,
                ))
            });
        let Some((code, at, message)) = parsed else {
            panic!("{server}: an error the test cannot place: {line}\nstderr:\n{stderr}");
        };
        assert!(
            at % 2 == 1 && at / 2 < corpus.len(),
            "{server}: an error on a marker line: {line}"
        );
        outcomes[at / 2] = Outcome::Error {
            code,
            message: message.to_string(),
        };
    }
    outcomes
}

/// Whether Shoal's outcome matches MariaDB's (or the corpus's word on
/// Shoal's error).
fn agree(s: &Statement, shoal: &Outcome, maria: &Outcome) -> bool {
    if let Some(expected) = s.shoal_error {
        return matches!(shoal, Outcome::Error { code, .. } if *code == expected);
    }
    match (shoal, maria) {
        (Outcome::Rows(a), Outcome::Rows(b)) if s.ordered() => a == b,
        (Outcome::Rows(a), Outcome::Rows(b)) => {
            let (mut a, mut b) = (a.clone(), b.clone());
            a.sort();
            b.sort();
            a == b
        }
        (Outcome::Error { code: a, .. }, Outcome::Error { code: b, .. }) => a == b,
        _ => false,
    }
}

#[test]
fn the_corpus_answers_the_same_on_shoal_and_on_mariadb() {
    let corpus = load_corpus();
    let queries = corpus.iter().filter(|s| s.is_query()).count();
    assert!(
        queries >= QUERIES_MIN,
        "the corpus has {queries} SELECTs; it should keep at least {QUERIES_MIN}"
    );

    let started = Instant::now();
    let maria = MariaDbServer::start();
    let cluster = TestCluster::start_nodes(2, 2, |_| {});
    let sql = start_sql(&cluster);
    eprintln!("servers up in {:.1} s", started.elapsed().as_secs_f64());

    let ran = Instant::now();
    let scratch = maria.scratch_dir();
    let shoal_outcomes = run_corpus(sql.port, &corpus, scratch, "shoal");
    let maria_outcomes = run_corpus(maria.port, &corpus, scratch, "mariadb");
    eprintln!(
        "{} statements ({queries} SELECTs) on both in {:.1} s",
        corpus.len(),
        ran.elapsed().as_secs_f64()
    );

    let mut report = String::new();
    let mut mismatches = 0;
    for ((s, shoal), maria) in corpus.iter().zip(&shoal_outcomes).zip(&maria_outcomes) {
        if agree(s, shoal, maria) {
            continue;
        }
        mismatches += 1;
        let expected = s.shoal_error.map_or(String::new(), |c| {
            format!("\n  expected of Shoal: ERROR {c}")
        });
        report.push_str(&format!(
            "\n{}:{}: {}{expected}\n  shoal:   {shoal}\n  mariadb: {maria}\n",
            s.file, s.line, s.sql
        ));
    }
    assert!(
        mismatches == 0,
        "{mismatches} of {} corpus statements answered differently on Shoal and on MariaDB \
         (rows compare as sorted lists without ORDER BY, errors by code):\n{report}",
        corpus.len()
    );
}
