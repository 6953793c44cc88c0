//! One connection's prepared statements: the table `COM_STMT_PREPARE`
//! fills, and the binding of `COM_STMT_EXECUTE`'s parameters as SQL
//! literals for [`Handler::execute`](crate::handler::Handler::execute).
//!
//! The executor checks a statement and names its columns at prepare
//! ([`Handler::prepare`](crate::handler::Handler::prepare)); an execution
//! is the statement's text, cut at the `?` placeholders, and each
//! parameter as the SQL literal that reads back as its value (see
//! [`binary`](super::binary) for why that is exact). The executor either
//! splices them into the text or puts them into the statement it keeps
//! parsed ([`exec::template`](crate::exec::template)).
//!
//! Invariants: at most `statements_max` statements per connection; long
//! data (`COM_STMT_SEND_LONG_DATA`) held per statement stays within
//! `long_data_bytes_max`; ids are never reused within a connection.

use std::collections::HashMap;
use std::sync::Arc;

use super::binary::{bytes_literal, read_param_literal, ParamError, ParamType};
use super::errors;
use super::sql_scan;
use super::wire::{Malformed, Reader};
use crate::handler::Execution;
use crate::outcome::SqlError;

struct PreparedStatement {
    /// The text as prepared, `?` marking the parameters.
    template: Arc<str>,
    /// The text around the placeholders: one more part than parameters.
    parts: Arc<[String]>,
    /// The parameter types the last execution that sent them declared
    /// (later executions may leave them out).
    types: Option<Vec<ParamType>>,
    /// Values sent with `COM_STMT_SEND_LONG_DATA` since the last execution.
    long_data: Vec<Option<Vec<u8>>>,
    /// `COM_STMT_SEND_LONG_DATA` has no answer, so its error waits here for
    /// the next execution.
    long_data_error: Option<SqlError>,
}

impl PreparedStatement {
    fn params(&self) -> usize {
        self.parts.len().saturating_sub(1)
    }

    fn long_data_bytes(&self) -> usize {
        self.long_data.iter().flatten().map(Vec::len).sum()
    }
}

/// Why an execution could not be bound.
#[derive(Debug)]
pub(crate) enum BindError {
    /// The packet does not hold what `COM_STMT_EXECUTE` holds.
    Malformed(Malformed),
    /// A well-formed request that cannot run (unknown statement, bad
    /// parameter): an ERR, and the connection goes on.
    Refused(SqlError),
}

impl From<Malformed> for BindError {
    fn from(m: Malformed) -> BindError {
        BindError::Malformed(m)
    }
}

/// A connection's statement table.
pub(crate) struct Statements {
    statements: HashMap<u32, PreparedStatement>,
    next_id: u32,
    statements_max: usize,
    long_data_bytes_max: usize,
}

impl Statements {
    pub(crate) fn new(statements_max: usize, long_data_bytes_max: usize) -> Statements {
        Statements {
            statements: HashMap::new(),
            next_id: 1,
            statements_max,
            long_data_bytes_max,
        }
    }

    /// Prepares `sql`: its id and number of parameters.
    pub(crate) fn prepare(&mut self, sql: &str) -> Result<(u32, u16), SqlError> {
        if self.statements.len() >= self.statements_max {
            return Err(errors::too_many_prepared(self.statements_max));
        }
        if sql_scan::has_several_statements(sql) {
            return Err(SqlError::syntax(
                "You have an error in your SQL syntax: a prepared statement holds one statement",
            ));
        }
        if sql.trim().trim_end_matches(';').trim().is_empty() {
            return Err(errors::empty_query());
        }
        let offsets = sql_scan::placeholders(sql);
        let params = u16::try_from(offsets.len()).map_err(|_| {
            SqlError::new(
                1390,
                "HY000",
                "Prepared statement contains too many placeholders",
            )
        })?;
        let mut parts = Vec::with_capacity(offsets.len() + 1);
        let mut start = 0;
        for offset in offsets {
            // Placeholders are ASCII, so these are character boundaries.
            parts.push(sql.get(start..offset).unwrap_or_default().to_string());
            start = offset + 1;
        }
        parts.push(sql.get(start..).unwrap_or_default().to_string());

        let id = self.next_id;
        // 4 billion statements on one connection would wrap; skip 0 and
        // any id still open rather than reuse one.
        self.next_id = self.next_id.wrapping_add(1).max(1);
        while self.statements.contains_key(&self.next_id) {
            self.next_id = self.next_id.wrapping_add(1).max(1);
        }
        self.statements.insert(
            id,
            PreparedStatement {
                long_data: vec![None; usize::from(params)],
                template: Arc::from(sql),
                parts: Arc::from(parts),
                types: None,
                long_data_error: None,
            },
        );
        Ok((id, params))
    }

    /// Drops statement `id` (its prepare failed after all).
    pub(crate) fn forget(&mut self, id: u32) {
        self.statements.remove(&id);
    }

    /// `COM_STMT_CLOSE` (no answer, even for an unknown id).
    pub(crate) fn close(&mut self, body: &[u8]) -> Result<(), Malformed> {
        let id = Reader::new(body).u32("a statement id")?;
        self.statements.remove(&id);
        Ok(())
    }

    /// `COM_STMT_RESET`: forgets long data.
    pub(crate) fn reset(&mut self, body: &[u8]) -> Result<Result<(), SqlError>, Malformed> {
        let id = Reader::new(body).u32("a statement id")?;
        let Some(statement) = self.statements.get_mut(&id) else {
            return Ok(Err(errors::unknown_statement(id, "mysqld_stmt_reset")));
        };
        statement.long_data.iter_mut().for_each(|d| *d = None);
        statement.long_data_error = None;
        Ok(Ok(()))
    }

    /// `COM_STMT_SEND_LONG_DATA`: appends a piece of one parameter's value.
    /// It has no answer; a problem is reported by the next execution.
    pub(crate) fn send_long_data(&mut self, body: &[u8]) -> Result<(), Malformed> {
        let mut reader = Reader::new(body);
        let id = reader.u32("a statement id")?;
        let param = usize::from(reader.u16("a parameter number")?);
        let data = reader.rest();
        let bytes_max = self.long_data_bytes_max;
        let Some(statement) = self.statements.get_mut(&id) else {
            return Ok(());
        };
        if statement.long_data_bytes().saturating_add(data.len()) > bytes_max {
            statement.long_data_error = Some(errors::packet_too_large());
            return Ok(());
        }
        match statement.long_data.get_mut(param) {
            Some(slot) => slot.get_or_insert_with(Vec::new).extend_from_slice(data),
            None => {
                statement.long_data_error = Some(errors::wrong_arguments(format!(
                    "long data for parameter {param} of a statement with {}",
                    statement.params()
                )))
            }
        }
        Ok(())
    }

    /// The id of the statement a `COM_STMT_EXECUTE`/`COM_STMT_FETCH` names.
    pub(crate) fn statement_id(body: &[u8]) -> Result<u32, Malformed> {
        Reader::new(body).u32("a statement id")
    }

    /// `COM_STMT_EXECUTE`: the statement and its parameters as literals.
    /// Long data is consumed, as MySQL does.
    pub(crate) fn bind(&mut self, body: &[u8]) -> Result<Execution, BindError> {
        let mut reader = Reader::new(body);
        let id = reader.u32("a statement id")?;
        let _cursor_flags = reader.u8("the cursor flags")?;
        let _iterations = reader.u32("the iteration count")?;
        let Some(statement) = self.statements.get_mut(&id) else {
            return Err(BindError::Refused(errors::unknown_statement(
                id,
                "mysqld_stmt_execute",
            )));
        };
        let params = statement.params();
        let long_data = std::mem::replace(&mut statement.long_data, vec![None; params]);
        if let Some(error) = statement.long_data_error.take() {
            return Err(BindError::Refused(error));
        }
        let mut literals = Vec::with_capacity(params);
        if params > 0 {
            let nulls = reader.bytes(params.div_ceil(8), "the NULL bitmap")?;
            if reader.u8("the new-parameters-bound flag")? == 1 {
                let mut types = Vec::with_capacity(params);
                for _ in 0..params {
                    let code = reader.u8("a parameter type")?;
                    let flags = reader.u8("a parameter type")?;
                    types.push(ParamType {
                        code,
                        unsigned: flags & 0x80 != 0,
                    });
                }
                statement.types = Some(types);
            }
            let Some(types) = statement.types.as_ref() else {
                return Err(BindError::Refused(errors::wrong_arguments(
                    "the first execution must send the parameters' types",
                )));
            };
            for (i, (ty, long)) in types.iter().zip(&long_data).enumerate() {
                let null = nulls.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0);
                let literal = if null {
                    "NULL".to_string()
                } else if let Some(bytes) = long {
                    bytes_literal(bytes)
                } else {
                    match read_param_literal(&mut reader, *ty) {
                        Ok(literal) => literal,
                        Err(ParamError::Malformed(m)) => return Err(BindError::Malformed(m)),
                        Err(ParamError::Invalid(why)) => {
                            return Err(BindError::Refused(errors::wrong_arguments(format!(
                                "parameter {}: {why}",
                                i + 1
                            ))))
                        }
                    }
                };
                literals.push(literal);
            }
        }
        Ok(Execution {
            template: statement.template.clone(),
            parts: statement.parts.clone(),
            literals,
        })
    }

    /// `COM_RESET_CONNECTION`: every statement goes.
    pub(crate) fn clear(&mut self) {
        self.statements.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn execute(id: u32, nulls: &[u8], types: Option<&[(u8, u8)]>, values: &[u8]) -> Vec<u8> {
        let mut body = id.to_le_bytes().to_vec();
        body.push(0);
        body.extend(1u32.to_le_bytes());
        body.extend(nulls);
        match types {
            Some(types) => {
                body.push(1);
                for (code, flags) in types {
                    body.extend([*code, *flags]);
                }
            }
            None => body.push(0),
        }
        body.extend(values);
        body
    }

    fn refused_code(result: Result<Execution, BindError>) -> Option<u16> {
        match result {
            Err(BindError::Refused(e)) => Some(e.code),
            _ => None,
        }
    }

    #[test]
    fn prepare_execute_splices_literals() {
        let mut statements = Statements::new(10, 1000);
        let (id, params) = statements
            .prepare("SELECT c FROM t WHERE id = ? AND name = ? AND note = '?'")
            .expect("prepares");
        assert_eq!(params, 2);
        let mut values = 7i32.to_le_bytes().to_vec();
        values.extend(b"\x04o'k\\");
        let sql = statements
            .bind(&execute(id, &[0], Some(&[(3, 0), (253, 0)]), &values))
            .expect("binds")
            .spliced();
        assert_eq!(
            sql,
            "SELECT c FROM t WHERE id = 7 AND name = X'6F276B5C' AND note = '?'"
        );
        // Types are remembered; NULL takes no bytes.
        let sql = statements
            .bind(&execute(id, &[0b10], None, &8i32.to_le_bytes()))
            .expect("binds")
            .spliced();
        assert_eq!(
            sql,
            "SELECT c FROM t WHERE id = 8 AND name = NULL AND note = '?'"
        );
    }

    #[test]
    fn the_first_execution_must_send_types() {
        let mut statements = Statements::new(10, 1000);
        let (id, _) = statements.prepare("SELECT ?").expect("prepares");
        assert_eq!(
            refused_code(statements.bind(&execute(id, &[0], None, &[]))),
            Some(1210)
        );
    }

    #[test]
    fn long_data_replaces_the_value_and_is_consumed() {
        let mut statements = Statements::new(10, 8);
        let (id, _) = statements
            .prepare("INSERT INTO t VALUES (?)")
            .expect("prepares");
        let mut piece = id.to_le_bytes().to_vec();
        piece.extend(0u16.to_le_bytes());
        piece.extend(b"abcd");
        statements.send_long_data(&piece).expect("well formed");
        statements.send_long_data(&piece).expect("well formed");
        let sql = statements
            .bind(&execute(id, &[0], Some(&[(252, 0)]), &[]))
            .expect("binds")
            .spliced();
        assert_eq!(sql, "INSERT INTO t VALUES ('abcdabcd')");
        // Past the limit: reported by the next execution, then cleared.
        for _ in 0..3 {
            statements.send_long_data(&piece).expect("well formed");
        }
        assert_eq!(
            refused_code(statements.bind(&execute(id, &[0], None, &[]))),
            Some(1153)
        );
        assert_eq!(
            refused_code(statements.bind(&execute(id, &[0], None, &[]))),
            None
        );
    }

    #[test]
    fn unknown_ids_limits_and_multi_statements() {
        let mut statements = Statements::new(2, 100);
        assert_eq!(
            refused_code(statements.bind(&execute(9, &[], None, &[]))),
            Some(1243)
        );
        assert_eq!(
            statements.prepare("SELECT 1; SELECT 2").map_err(|e| e.code),
            Err(1064)
        );
        assert_eq!(statements.prepare("  ; ").map_err(|e| e.code), Err(1065));
        let (a, _) = statements.prepare("SELECT 1").expect("one");
        let (b, _) = statements.prepare("SELECT 2").expect("two");
        assert_ne!(a, b);
        assert_eq!(
            statements.prepare("SELECT 3").map_err(|e| e.code),
            Err(1461)
        );
        statements.close(&a.to_le_bytes()).expect("well formed");
        let (c, _) = statements.prepare("SELECT 3").expect("room again");
        assert!(c != a && c != b, "ids are not reused");
        assert_eq!(
            statements
                .reset(&a.to_le_bytes())
                .map(|r| r.map_err(|e| e.code)),
            Ok(Err(1243))
        );
    }

    #[test]
    fn truncated_executions_are_malformed() {
        let mut statements = Statements::new(10, 100);
        let (id, _) = statements.prepare("SELECT ?, ?").expect("prepares");
        let full = execute(id, &[0], Some(&[(8, 0), (8, 0)]), &[1u8; 16]);
        for len in 0..full.len() {
            match statements.bind(&full[..len]) {
                Err(BindError::Malformed(_)) | Err(BindError::Refused(_)) => {}
                Ok(e) => panic!("bound {} from {len} of {} bytes", e.spliced(), full.len()),
            }
        }
        assert!(statements.bind(&full).is_ok());
    }
}
