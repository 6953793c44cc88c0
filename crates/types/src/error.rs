//! The error-code registry: every error a user can see has a stable numeric
//! code, a class that says what to do about it, and a message. Codes follow
//! NDB's numbers where NDB has the same error, so people who know NDB can
//! read them; Shoal-only errors use 5000–6999. `docs/ERRORS.md` lists them.

use std::fmt;

/// What the caller should do about an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The operation failed and had no effect; retrying the whole
    /// transaction may succeed.
    Temporary,
    /// The operation failed and had no effect; retrying will fail again
    /// until the request or the schema changes.
    Permanent,
    /// The transaction may or may not have committed (e.g. the connection
    /// was lost after the commit request was sent). Read back to find out.
    UnknownResult,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Temporary => "temporary",
            ErrorClass::Permanent => "permanent",
            ErrorClass::UnknownResult => "unknown result",
        }
    }
}

macro_rules! error_codes {
    ($( $(#[$doc:meta])* $name:ident = $code:expr, $class:ident, $msg:expr; )*) => {
        /// A registered error code. The numeric value is stable and goes on the wire.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum ErrorCode {
            $( $(#[$doc])* $name = $code, )*
        }

        impl ErrorCode {
            /// Every registered code, in registry order (used by the docs test).
            pub const ALL: &'static [ErrorCode] = &[ $( ErrorCode::$name, )* ];

            pub fn from_u16(code: u16) -> Option<ErrorCode> {
                match code {
                    $( $code => Some(ErrorCode::$name), )*
                    _ => None,
                }
            }

            pub fn class(self) -> ErrorClass {
                match self {
                    $( ErrorCode::$name => ErrorClass::$class, )*
                }
            }

            /// The fixed message for this code.
            pub fn message(self) -> &'static str {
                match self {
                    $( ErrorCode::$name => $msg, )*
                }
            }
        }
    };
}

error_codes! {
    /// The row addressed by a read, update or delete does not exist.
    TupleNotFound = 626, Permanent, "Tuple did not exist";
    /// An insert found a row with the same primary key.
    TupleAlreadyExists = 630, Permanent, "Tuple already existed when attempting to insert";
    /// A lock wait lasted longer than `deadlock_timeout_ms`; the transaction was aborted.
    DeadlockTimeout = 266, Temporary, "Time-out in NDB, probably caused by deadlock";
    /// The transaction was idle longer than `transaction_inactive_timeout_ms` and was aborted.
    InactiveTimeout = 237, Temporary, "Transaction had timed out (inactive too long) and was aborted";
    /// The node has no room for more concurrent transactions.
    TooManyTransactions = 233, Temporary, "Out of transaction records in transaction coordinator (increase max_concurrent_transactions)";
    /// The node has no room for more concurrent operations.
    TooManyOperations = 234, Temporary, "Out of operation records (increase max_concurrent_operations)";
    /// Data memory is full; deletes free room.
    OutOfDataMemory = 827, Temporary, "Out of data memory (increase data_memory or delete rows)";
    /// The table does not exist (never created, or dropped).
    NoSuchTable = 723, Permanent, "No such table existed";
    /// The request named an older or newer schema version than the node has.
    InvalidSchemaVersion = 241, Permanent, "Invalid schema object version: re-read the table definition";
    /// A table with the same name exists already.
    TableExists = 721, Permanent, "Schema object with given name already exists";
    /// The table definition is invalid (see the detail).
    BadTableDefinition = 740, Permanent, "Invalid table definition";
    /// A value has the wrong length or form for its column's type.
    BadValue = 829, Permanent, "Corrupt data received for insert/update: value does not fit the column type";
    /// NULL was given for a NOT NULL column, or a NOT NULL column without default was left out.
    IllegalNull = 839, Permanent, "Illegal null attribute";
    /// A column id does not exist in the table.
    NoSuchColumn = 4004, Permanent, "Attribute name or id not found in the table";
    /// A value is longer than its column allows.
    ValueTooLong = 4257, Permanent, "Value too long for column";
    /// The primary key is missing columns or has extra bytes.
    BadPrimaryKey = 4256, Permanent, "Primary key value is malformed for this table";
    /// The operation or transaction request is malformed.
    BadRequest = 4000, Permanent, "Malformed request";
    /// The transaction is not known to the coordinator (already finished or aborted).
    TransactionNotFound = 4350, Permanent, "Transaction already aborted or unknown to the coordinator";
    /// A scan's filter program is malformed, too large, or does not fit
    /// the table's columns (see the detail).
    BadFilter = 4270, Permanent, "Scan filter program is malformed or does not fit the table";
    /// The data node runs as many scans as it may (`max_concurrent_scans`).
    TooManyScans = 488, Temporary, "Too many active scans (increase max_concurrent_scans)";
    /// The scan is not known to its coordinator (finished, closed or failed).
    ScanNotFound = 4271, Permanent, "Scan already finished or unknown to the coordinator";
    /// No data node could be reached.
    ClusterFailure = 4009, Temporary, "Cluster failure: no data node reachable";
    /// The connection to the data node broke before the transaction finished; it was aborted.
    NodeFailureAbort = 4010, Temporary, "Connection to the data node lost; transaction aborted";
    /// A data node the transaction used failed; the transaction was aborted.
    NodeFailed = 4025, Temporary, "Node failure caused abort of transaction; retry";
    /// The fragment's replicas or primary changed while the operation was on its way.
    DistributionChanged = 1204, Temporary, "Temporary failure, distribution changed; retry";
    /// The redo log of a data node is nearly full: writes to logged tables
    /// are refused until a local checkpoint frees space.
    RedoLogFull = 410, Temporary, "REDO log files overloaded: a local checkpoint is freeing space; retry";
    /// Signals towards another data node pile up unsent (that node or the
    /// link is slow): new operations that would start there are refused.
    SendBufferOverloaded = 1218, Temporary, "Send buffers overloaded in the data node; retry";
    /// The connection broke after a commit was requested: the outcome is unknown.
    CommitOutcomeUnknown = 4012, UnknownResult, "Connection lost after commit was requested; outcome unknown";
    /// The client gave up waiting for the data node.
    ReceiveTimeout = 4008, UnknownResult, "Timed out waiting for the data node";
    /// The frame broke the wire protocol (see the detail); the connection is closed.
    ProtocolViolation = 5001, Permanent, "Protocol violation; connection closed";
    /// A frame was larger than the agreed limit; the connection is closed.
    FrameTooLarge = 5002, Permanent, "Frame larger than the limit; connection closed";
    /// The peer speaks another protocol version or another cluster id.
    HandshakeRejected = 5003, Permanent, "Handshake rejected (protocol version, cluster id or node id)";
    /// The request is bigger than a configured limit (operations per transaction, row size).
    RequestTooLarge = 5004, Permanent, "Request exceeds a configured limit";
    /// The node is shutting down or not started yet.
    NodeNotReady = 5005, Temporary, "Data node not started or shutting down";
    /// The cluster declared this data node failed; it must restart to rejoin.
    NodeDeclaredFailed = 5006, Temporary, "Data node was declared failed by the cluster; it restarts to rejoin";
    /// mgmd refused the node id (unknown to the config, or already in use).
    NodeIdRefused = 6001, Permanent, "Node id refused by the management server";
    /// The management server could not be reached or answered wrongly.
    MgmdFailure = 6002, Temporary, "Management server unreachable or failed";
    /// Another process holds the data directory (a second `shoal up`,
    /// mgmd or data node pointed at it).
    DataDirInUse = 6003, Permanent, "Data directory in use by another process";
    /// An SQL account (user and host) to create exists already.
    UserExists = 6004, Permanent, "Account already exists";
    /// An SQL account named by a request does not exist.
    NoSuchUser = 6005, Permanent, "No such account";
    /// A REVOKE named an account that does not hold that grant (or does not exist).
    NoSuchGrant = 6006, Permanent, "No such grant for the account";
    /// A bug: a state the code believes cannot happen.
    Internal = 6999, Permanent, "Internal error";
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message(), *self as u16)
    }
}

/// An error with its registered code and an optional detail that says what
/// exactly was wrong ("column 3 `name`: 40 bytes, VARCHAR(32) allows 32").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShoalError {
    pub code: ErrorCode,
    pub detail: String,
}

impl ShoalError {
    pub fn new(code: ErrorCode) -> Self {
        ShoalError {
            code,
            detail: String::new(),
        }
    }

    pub fn with_detail(code: ErrorCode, detail: impl Into<String>) -> Self {
        ShoalError {
            code,
            detail: detail.into(),
        }
    }

    pub fn class(&self) -> ErrorClass {
        self.code.class()
    }

    pub fn code_u16(&self) -> u16 {
        self.code as u16
    }
}

impl fmt::Display for ShoalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error {} ({}): {}",
            self.code as u16,
            self.code.class().as_str(),
            self.code.message()
        )?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for ShoalError {}

impl From<ErrorCode> for ShoalError {
    fn from(code: ErrorCode) -> Self {
        ShoalError::new(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for &c in ErrorCode::ALL {
            assert!(seen.insert(c as u16), "duplicate code {}", c as u16);
            assert_eq!(ErrorCode::from_u16(c as u16), Some(c));
            assert!(!c.message().is_empty());
        }
        assert_eq!(ErrorCode::from_u16(1), None);
    }

    #[test]
    fn the_errors_page_lists_every_code_with_its_class() {
        let page = include_str!("../../../docs/ERRORS.md");
        for &c in ErrorCode::ALL {
            let row = format!("| {} | `{:?}` | {} |", c as u16, c, c.class().as_str());
            assert!(
                page.contains(&row),
                "docs/ERRORS.md lacks the row starting {row:?}"
            );
        }
    }

    #[test]
    fn display_has_code_class_and_detail() {
        let e = ShoalError::with_detail(ErrorCode::OutOfDataMemory, "table t1");
        let s = e.to_string();
        assert!(
            s.contains("827") && s.contains("temporary") && s.contains("table t1"),
            "{s}"
        );
    }
}
