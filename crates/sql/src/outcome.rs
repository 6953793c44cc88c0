//! What a statement answers, independent of the wire: the protocol layer
//! encodes it, the executor produces it.

/// A column of a result set (MySQL's column definition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// The column's name as the client sees it (its alias if it has one).
    pub name: String,
    /// The table it comes from (its alias), empty for an expression.
    pub table: String,
    /// The database it comes from, empty for an expression.
    pub schema: String,
    pub kind: ColumnKind,
    /// The column's display length (characters × 4 for utf8mb4 strings,
    /// bytes for binary ones, digits for numbers).
    pub length: u32,
    /// Digits after the decimal point (floats: 31 = not fixed).
    pub decimals: u8,
    pub nullable: bool,
    pub unsigned: bool,
    /// Binary data (a byte string, or a number): collation 63 `binary`;
    /// otherwise utf8mb4_bin (46).
    pub binary: bool,
    /// Part of the table's primary key.
    pub primary_key: bool,
}

/// MySQL's column types, as far as Shoal has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    /// TINYINT
    Tiny,
    /// SMALLINT
    Short,
    /// INT
    Long,
    /// BIGINT
    LongLong,
    Float,
    Double,
    /// VARCHAR / VARBINARY
    VarString,
    /// CHAR / BINARY
    String,
    Timestamp,
    DateTime,
    Date,
    Time,
    /// DECIMAL (columns, decimal arithmetic, SUM and AVG of integers):
    /// its text in both protocols.
    NewDecimal,
    /// An expression's result with no type of its own (NULL).
    Null,
}

/// A statement's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done, no rows (DDL, DML, SET, BEGIN, ...).
    Ok {
        affected_rows: u64,
        last_insert_id: u64,
        warnings: u16,
        /// MySQL's info string ("Rows matched: 1  Changed: 1  Warnings: 0").
        info: String,
    },
    /// A result set: each row holds each column's value in the text
    /// protocol's form (`None`: NULL).
    Rows {
        columns: Vec<Column>,
        rows: Vec<Vec<Option<Vec<u8>>>>,
    },
    /// A result set whose columns and rows went to the statement's
    /// [`crate::answer::ResultStream`] as they were read; only its end is
    /// left to write.
    Streamed,
}

impl Outcome {
    /// An OK with nothing to report.
    pub fn ok() -> Outcome {
        Outcome::Ok {
            affected_rows: 0,
            last_insert_id: 0,
            warnings: 0,
            info: String::new(),
        }
    }

    /// An OK for `n` affected rows.
    pub fn affected(n: u64) -> Outcome {
        Outcome::Ok {
            affected_rows: n,
            last_insert_id: 0,
            warnings: 0,
            info: String::new(),
        }
    }
}

/// An error as MySQL reports it: its error number, SQLSTATE and message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ERROR {code} ({}): {message}", String::from_utf8_lossy(sqlstate))]
pub struct SqlError {
    pub code: u16,
    pub sqlstate: [u8; 5],
    pub message: String,
}

impl SqlError {
    pub fn new(code: u16, sqlstate: &str, message: impl Into<String>) -> SqlError {
        let mut state = *b"HY000";
        if sqlstate.len() == 5 {
            state.copy_from_slice(sqlstate.as_bytes());
        }
        SqlError {
            code,
            sqlstate: state,
            message: message.into(),
        }
    }

    /// 1064: the statement does not parse.
    pub fn syntax(message: impl Into<String>) -> SqlError {
        SqlError::new(1064, "42000", message)
    }

    /// 1235: a feature Shoal does not have (yet).
    pub fn not_supported(what: impl Into<String>) -> SqlError {
        SqlError::new(
            1235,
            "42000",
            format!(
                "This version of Shoal doesn't yet support '{}'",
                what.into()
            ),
        )
    }
}
