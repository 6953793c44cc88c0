//! Shoal's errors as MySQL's: the code, SQLSTATE and message a MySQL
//! client expects, the way NDB's mysqld maps NDB's errors.
//!
//! | Shoal | MySQL |
//! |---|---|
//! | 266 lock wait timed out | 1205 HY000 (the transaction is rolled back) |
//! | 630 already exists | 1062 23000 (callers name the entry and key) |
//! | 723 no such table (a data node's answer) | 1412 HY000 (the cached table is stale; the session retries an autocommit statement once) |
//! | 721 exists | 1050 42S01 |
//! | 839 illegal NULL | 1048 23000 |
//! | 4257 too long | 1406 22001 |
//! | 829 bad value | 1264 22003 |
//! | 241 stale schema version | 1412 HY000 |
//! | any other, class temporary | 1297 HY000 "Got temporary error N 'msg' from NDBCLUSTER" |
//! | any other | 1296 HY000 "Got error N 'msg' from NDBCLUSTER" |

use crate::outcome::SqlError;
use shoal_client::{ErrorClass, ErrorCode, ShoalError};

fn described(e: &ShoalError) -> String {
    if e.detail.is_empty() {
        e.code.message().to_string()
    } else {
        format!("{}: {}", e.code.message(), e.detail)
    }
}

/// The MySQL error for a Shoal error met where nothing more specific is
/// known.
pub fn from_shoal(e: &ShoalError) -> SqlError {
    match e.code {
        ErrorCode::DeadlockTimeout => SqlError::new(
            1205,
            "HY000",
            "Lock wait timeout exceeded; try restarting transaction",
        ),
        ErrorCode::TupleAlreadyExists => {
            SqlError::new(1062, "23000", format!("Duplicate entry: {}", described(e)))
        }
        // A data node no longer knows the table this SQL node cached: it
        // was dropped or changed (the cache is forgotten; a retry reads
        // mgmd's current schema).
        ErrorCode::NoSuchTable => SqlError::new(
            1412,
            "HY000",
            format!(
                "Table definition has changed, please retry transaction ({})",
                described(e)
            ),
        ),
        ErrorCode::TableExists => SqlError::new(
            1050,
            "42S01",
            format!("Table already exists: {}", described(e)),
        ),
        ErrorCode::IllegalNull => SqlError::new(1048, "23000", described(e)),
        ErrorCode::ValueTooLong => SqlError::new(1406, "22001", described(e)),
        ErrorCode::BadValue => SqlError::new(1264, "22003", described(e)),
        ErrorCode::InvalidSchemaVersion => SqlError::new(
            1412,
            "HY000",
            format!(
                "Table definition has changed, please retry transaction ({})",
                described(e)
            ),
        ),
        code if e.class() == ErrorClass::Temporary => SqlError::new(
            1297,
            "HY000",
            format!(
                "Got temporary error {} '{}' from NDBCLUSTER",
                code as u16,
                described(e)
            ),
        ),
        code => SqlError::new(
            1296,
            "HY000",
            format!(
                "Got error {} '{}' from NDBCLUSTER",
                code as u16,
                described(e)
            ),
        ),
    }
}

/// 1062 for a duplicate of `entry` in index `key` (`PRIMARY` or a unique
/// index's name).
pub fn duplicate(entry: &str, key: &str) -> SqlError {
    SqlError::new(
        1062,
        "23000",
        format!("Duplicate entry '{entry}' for key '{key}'"),
    )
}

/// The unique index a 630's detail names ("unique index `u` of table
/// ..."), if any.
pub fn unique_index_in(e: &ShoalError) -> Option<String> {
    let rest = e.detail.split("unique index `").nth(1)?;
    Some(rest.split('`').next()?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_as_ndb_mysqld_maps_them() {
        let e = |code| from_shoal(&ShoalError::with_detail(code, "x"));
        assert_eq!(
            (
                e(ErrorCode::DeadlockTimeout).code,
                &e(ErrorCode::DeadlockTimeout).sqlstate
            ),
            (1205, b"HY000")
        );
        assert_eq!(e(ErrorCode::TupleAlreadyExists).code, 1062);
        assert_eq!(e(ErrorCode::NoSuchTable).code, 1412);
        let t = e(ErrorCode::NodeFailureAbort);
        assert_eq!(t.code, 1297);
        assert!(
            t.message.starts_with("Got temporary error 4010 '"),
            "{}",
            t.message
        );
        assert!(t.message.ends_with("' from NDBCLUSTER"), "{}", t.message);
        let p = e(ErrorCode::BadRequest);
        assert_eq!(p.code, 1296);
        assert!(p.message.starts_with("Got error 4000 '"), "{}", p.message);
        let dup = ShoalError::with_detail(
            ErrorCode::TupleAlreadyExists,
            "operation 0 on table \"t\": duplicate entry: another row holds this value of unique index `by_email` of table `t`",
        );
        assert_eq!(unique_index_in(&dup).as_deref(), Some("by_email"));
        assert_eq!(
            unique_index_in(&ShoalError::new(ErrorCode::TupleAlreadyExists)),
            None
        );
    }
}
