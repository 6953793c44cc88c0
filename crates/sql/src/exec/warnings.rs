//! The conditions a statement raises (notes, warnings, its error) and the
//! list a session keeps of them: MySQL's diagnostics area, read by SHOW
//! WARNINGS, SHOW ERRORS, SHOW COUNT(*) WARNINGS, `@@warning_count` and
//! `@@error_count`, and counted in the OK packet.
//!
//! Executors raise a condition wherever they notice it ([`note`],
//! [`warning`], [`stored_value_note`]) without a list passed down to
//! them: the session runs each statement inside [`collect`], which puts
//! a sink in a task-local for the statement's duration (statements run
//! on the session's task, as their privileges do). Raised outside a
//! statement, a condition goes nowhere.
//!
//! MySQL's rules, as the session applies them ([`Diagnostics::settle`]):
//! a statement that raises conditions or fails replaces the list (its
//! error is the list's last entry, level Error); a statement that raises
//! none clears it, except the diagnostic ones ([`keeps_list`]: SHOW
//! WARNINGS / ERRORS / COUNT(*), and a SELECT of no table, such as
//! `SELECT @@warning_count`), which leave it as it is.
//!
//! Invariants: a list holds at most [`CONDITIONS_MAX`] conditions (MySQL's
//! `max_error_count`); those beyond are counted, not kept, so
//! `@@warning_count` still tells how many there were.

use crate::outcome::{Outcome, SqlError};
use shoal_types::Value;
use sqlparser::ast::{SetExpr, Statement};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;

/// Conditions one list keeps (MySQL's default `max_error_count`).
pub const CONDITIONS_MAX: usize = 64;

/// How serious a condition is, as SHOW WARNINGS names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Note,
    Warning,
    Error,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Note => "Note",
            Level::Warning => "Warning",
            Level::Error => "Error",
        }
    }
}

/// One row of SHOW WARNINGS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub level: Level,
    pub code: u16,
    pub message: String,
}

/// A statement's conditions: the first [`CONDITIONS_MAX`] of them, and
/// how many there were of each level.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics {
    kept: Vec<Condition>,
    /// All conditions raised, kept or not (`@@warning_count`).
    count: u64,
    /// Errors among them (`@@error_count`).
    errors: u64,
}

impl Diagnostics {
    pub fn push(&mut self, condition: Condition) {
        self.count = self.count.saturating_add(1);
        if condition.level == Level::Error {
            self.errors = self.errors.saturating_add(1);
        }
        if self.kept.len() < CONDITIONS_MAX {
            self.kept.push(condition);
        }
    }

    /// The conditions kept, in the order they were raised.
    pub fn conditions(&self) -> &[Condition] {
        &self.kept
    }

    /// `@@warning_count`: every condition raised, kept or not.
    pub fn warning_count(&self) -> u64 {
        self.count
    }

    /// `@@error_count`.
    pub fn error_count(&self) -> u64 {
        self.errors
    }

    /// The session's list after a statement that raised `raised` and
    /// ended with `result`, by MySQL's rules (see the module's
    /// documentation); an OK's warning count is set to what the
    /// statement raised, so the packet and SHOW COUNT(*) WARNINGS agree.
    pub fn settle(
        &mut self,
        mut raised: Diagnostics,
        result: &mut Result<Outcome, SqlError>,
        keeps_list: bool,
    ) {
        match result {
            Err(e) => {
                raised.push(Condition {
                    level: Level::Error,
                    code: e.code,
                    message: e.message.clone(),
                });
                *self = raised;
            }
            Ok(outcome) => {
                if let Outcome::Ok { warnings, info, .. } = outcome {
                    *warnings = u16::try_from(raised.count).unwrap_or(u16::MAX);
                    // The info string's count ("Records: 3  Duplicates: 1
                    // Warnings: 1", always its last field) says the same.
                    if let Some(at) = info.rfind("Warnings: ") {
                        info.truncate(at + "Warnings: ".len());
                        info.push_str(&raised.count.to_string());
                    }
                }
                if raised.count > 0 || !keeps_list {
                    *self = raised;
                }
            }
        }
    }
}

/// What a statement's sink records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recording {
    /// Notes are recorded (`@@sql_notes`, on by default).
    pub notes: bool,
    /// The statement stores values into columns (INSERT, UPDATE, ...):
    /// notes about converting a value for its column concern it. A
    /// SELECT converts values only to look keys up, which MySQL does not
    /// note.
    pub stores_values: bool,
}

struct Sink {
    raised: Diagnostics,
    recording: Recording,
}

tokio::task_local! {
    /// The sink of the statement running on this task.
    static SINK: RefCell<Sink>;
}

/// Runs `work` (one statement) with a sink for its conditions, and
/// returns them with its output.
pub async fn collect<F: Future>(recording: Recording, work: F) -> (F::Output, Diagnostics) {
    let sink = RefCell::new(Sink {
        raised: Diagnostics::default(),
        recording,
    });
    SINK.scope(sink, async {
        let out = work.await;
        let raised = SINK
            .try_with(|s| std::mem::take(&mut s.borrow_mut().raised))
            .unwrap_or_default();
        (out, raised)
    })
    .await
}

fn raise(level: Level, e: &SqlError, only_when_storing: bool) {
    // No sink: not inside a statement (a unit test, a background task).
    let _ = SINK.try_with(|s| {
        let mut s = s.borrow_mut();
        if (level == Level::Note && !s.recording.notes)
            || (only_when_storing && !s.recording.stores_values)
        {
            return;
        }
        s.raised.push(Condition {
            level,
            code: e.code,
            message: e.message.clone(),
        });
    });
}

/// Raises `e` as a Note (what MySQL notes: IF [NOT] EXISTS of something
/// missing or present).
pub fn note(e: &SqlError) {
    raise(Level::Note, e, false);
}

/// Raises `e` as a Warning (a row INSERT IGNORE skipped, a collation
/// Shoal does not have).
pub fn warning(e: &SqlError) {
    raise(Level::Warning, e, false);
}

/// Raises `e` as a Note about a value converted for the column it is
/// stored in (a DECIMAL rounded to the column's scale): only when the
/// statement stores values.
pub fn stored_value_note(e: &SqlError) {
    raise(Level::Note, e, true);
}

/// Forgets what the running statement raised so far (it runs again from
/// the start, as nothing of it was done).
pub fn forget() {
    let _ = SINK.try_with(|s| s.borrow_mut().raised = Diagnostics::default());
}

/// Whether `statement` leaves the session's list as it is when it raises
/// nothing: the diagnostic statements, and a SELECT of no table (which
/// reads no table to warn about; `SELECT @@warning_count` must see the
/// list it reports on).
pub fn keeps_list(statement: &Statement) -> bool {
    match statement {
        Statement::ShowVariable { variable } => matches!(
            variable
                .first()
                .map(|w| w.value.to_ascii_uppercase())
                .as_deref(),
            Some("WARNINGS" | "ERRORS" | "COUNT")
        ),
        Statement::Query(q) => match q.body.as_ref() {
            SetExpr::Select(s) => {
                q.with.is_none()
                    && (s.from.is_empty()
                        || s.from.iter().all(|f| {
                            f.joins.is_empty()
                                && f.relation.to_string().eq_ignore_ascii_case("dual")
                        }))
            }
            _ => false,
        },
        _ => false,
    }
}

/// Whether the session records notes: `@@sql_notes` is on (a number,
/// or ON / OFF as SET left it).
pub fn notes_on(variables: &BTreeMap<String, Value>) -> bool {
    match variables.get("sql_notes") {
        Some(Value::Str(s)) => !matches!(s.to_ascii_uppercase().as_str(), "OFF" | "0" | "FALSE"),
        Some(v) => super::expr::truth(v) != Some(false),
        None => true,
    }
}

/// The statement's recording options for a session whose `@@sql_notes`
/// is `notes`.
pub fn recording(statement: Option<&Statement>, notes: bool) -> Recording {
    Recording {
        notes,
        stores_values: matches!(
            statement,
            Some(Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(code: u16) -> Condition {
        Condition {
            level: Level::Warning,
            code,
            message: format!("w{code}"),
        }
    }

    #[test]
    fn a_list_keeps_the_first_conditions_and_counts_them_all() {
        let mut d = Diagnostics::default();
        for i in 0..(CONDITIONS_MAX as u16 + 10) {
            d.push(condition(i));
        }
        assert_eq!(d.conditions().len(), CONDITIONS_MAX);
        assert_eq!(d.warning_count(), CONDITIONS_MAX as u64 + 10);
        assert_eq!(d.conditions()[0].code, 0);
        assert_eq!(d.error_count(), 0);
    }

    #[test]
    fn settling_follows_mysql_rules() {
        let mut kept = Diagnostics::default();
        kept.push(condition(1062));
        // A diagnostic statement that raised nothing keeps the list.
        let mut ok = Ok(Outcome::ok());
        kept.settle(Diagnostics::default(), &mut ok, true);
        assert_eq!(kept.warning_count(), 1);
        // Another statement that raised nothing clears it.
        kept.settle(Diagnostics::default(), &mut ok, false);
        assert_eq!(kept.warning_count(), 0);
        // An error replaces it, and counts as an error.
        let mut raised = Diagnostics::default();
        raised.push(condition(1265));
        let mut failed = Err(SqlError::new(1146, "42S02", "no table"));
        kept.settle(raised.clone(), &mut failed, true);
        assert_eq!(kept.warning_count(), 2);
        assert_eq!(kept.error_count(), 1);
        assert_eq!(kept.conditions()[1].level, Level::Error);
        // An OK reports what its statement raised.
        let mut ok = Ok(Outcome::ok());
        kept.settle(raised, &mut ok, false);
        assert!(matches!(ok, Ok(Outcome::Ok { warnings: 1, .. })));
    }

    #[tokio::test]
    async fn conditions_reach_the_statement_that_runs() {
        let recording = Recording {
            notes: true,
            stores_values: false,
        };
        let ((), raised) = collect(recording, async {
            note(&SqlError::new(1051, "42S02", "Unknown table 'd.t'"));
            stored_value_note(&SqlError::new(1265, "01000", "Data truncated"));
            warning(&SqlError::new(1062, "23000", "Duplicate entry"));
        })
        .await;
        let codes: Vec<u16> = raised.conditions().iter().map(|c| c.code).collect();
        assert_eq!(codes, [1051, 1062]);
        let quiet = Recording {
            notes: false,
            stores_values: true,
        };
        let ((), raised) = collect(quiet, async {
            note(&SqlError::new(1051, "42S02", "Unknown table 'd.t'"));
        })
        .await;
        assert_eq!(raised.warning_count(), 0);
        // Outside a statement a condition goes nowhere.
        warning(&SqlError::new(1062, "23000", "Duplicate entry"));
    }
}
