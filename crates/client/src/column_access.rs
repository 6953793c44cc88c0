//! Typed, allocation-free access to one column of a row, shared by both
//! row types ([`RowBuf`](crate::RowBuf), laid out by a record, and
//! [`Row`](crate::Row), an indexed attribute list).
//!
//! A row type provides `fn column(&self, col: u16) -> Option<Column<'_>>`
//! (O(1), its values already validated when the row was filled) and
//! `fn column_bytes(&self, col: u16) -> Option<Option<&[u8]>>` (the same
//! without the column's definition, for [`RowBuf::get_raw`]'s sake: a
//! caller checking every column of every row calls it most) and gets the
//! accessors from [`column_accessors!`].
//!
//! [`RowBuf::get_raw`]: crate::RowBuf::get_raw Each typed accessor reads only
//! the SQL types whose canonical bytes are that Rust type; any other type
//! is an error (never a panic, never a silent conversion), so a caller
//! that reads a column with the wrong width finds out at once.

use shoal_types::value::decode_value;
use shoal_types::{ColumnDef, ColumnType, ErrorCode, ShoalError, Value};

/// One column of a row: its definition and canonical bytes (`None`: NULL).
#[derive(Clone, Copy)]
pub(crate) struct Column<'a> {
    pub def: &'a ColumnDef,
    pub bytes: Option<&'a [u8]>,
}

impl<'a> Column<'a> {
    /// The bytes as an `N`-byte array, after checking the column's type.
    #[inline]
    pub fn fixed<const N: usize>(
        self,
        fits: fn(ColumnType) -> bool,
        accessor: &str,
    ) -> Result<Option<[u8; N]>, ShoalError> {
        if !fits(self.def.ty) {
            return Err(wrong_type(self.def, accessor));
        }
        match self.bytes {
            None => Ok(None),
            // Sizes were checked when the row was filled; a mismatch here
            // is a bug, reported rather than panicked on.
            Some(b) => b
                .try_into()
                .map(Some)
                .map_err(|_| wrong_size(self.def, b.len())),
        }
    }

    /// The bytes of a CHAR, VARCHAR, BINARY or VARBINARY column.
    #[inline]
    pub fn bytes(self, accessor: &str) -> Result<Option<&'a [u8]>, ShoalError> {
        match self.def.ty {
            ColumnType::Char(_)
            | ColumnType::VarChar(_)
            | ColumnType::Binary(_)
            | ColumnType::VarBinary(_) => Ok(self.bytes),
            _ => Err(wrong_type(self.def, accessor)),
        }
    }

    /// The text of a CHAR (without its padding spaces, as
    /// [`decode_value`] gives it) or VARCHAR column.
    #[inline]
    pub fn str(self, accessor: &str) -> Result<Option<&'a str>, ShoalError> {
        let b = match (self.def.ty, self.bytes) {
            (ColumnType::Char(_) | ColumnType::VarChar(_), None) => return Ok(None),
            (ColumnType::Char(_), Some(b)) => shoal_types::value::trim_trailing_spaces(b),
            (ColumnType::VarChar(_), Some(b)) => b,
            _ => return Err(wrong_type(self.def, accessor)),
        };
        std::str::from_utf8(b).map(Some).map_err(|e| {
            ShoalError::with_detail(
                ErrorCode::BadValue,
                format!(
                    "column {:?} holds bytes that are not UTF-8 ({e}); read them with get_bytes",
                    self.def.name
                ),
            )
        })
    }

    /// The value, decoded (allocates only for strings and bytes).
    #[inline]
    pub fn value(self) -> Value {
        self.bytes
            .map_or(Value::Null, |b| decode_value(self.def.ty, b))
    }
}

fn wrong_type(def: &ColumnDef, accessor: &str) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::BadRequest,
        format!(
            "column {:?} is {}; {accessor} cannot read it",
            def.name,
            def.ty.sql_name()
        ),
    )
}

fn wrong_size(def: &ColumnDef, len: usize) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::Internal,
        format!(
            "column {:?} ({}) holds {len} bytes in a checked row",
            def.name,
            def.ty.sql_name()
        ),
    )
}

/// The error of an accessor asked for a column the row does not hold.
pub(crate) fn not_in_row(table: &str, col: u16) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::NoSuchColumn,
        format!("this row of table {table:?} holds no column id {col}"),
    )
}

/// Generates the accessors of a row type that has
/// `fn column(&self, col: u16) -> Option<Column<'_>>` and
/// `fn table_name(&self) -> &str`. Columns are named by their id in the
/// table (`Table::column` gives it from a name, once).
macro_rules! column_accessors {
    ($($name:ident -> $t:ty, $n:literal, $doc:literal, ($($pat:pat_param)|+);)*) => {
        fn column_or_err(&self, col: u16) -> Result<$crate::column_access::Column<'_>, $crate::ShoalError> {
            self.column(col)
                .ok_or_else(|| $crate::column_access::not_in_row(self.table_name(), col))
        }

        /// Whether column `col` is NULL. Errors: the row does not hold it
        /// (`NoSuchColumn`).
        pub fn is_null(&self, col: u16) -> Result<bool, $crate::ShoalError> {
            Ok(self.column_or_err(col)?.bytes.is_none())
        }

        $(
            #[doc = concat!("Column `col` as `", stringify!($t), "` (", $doc, "); `Ok(None)` when it is NULL. ")]
            #[doc = "Errors: the row does not hold it (`NoSuchColumn`), it has another type (`BadRequest`)."]
            #[inline]
            pub fn $name(&self, col: u16) -> Result<Option<$t>, $crate::ShoalError> {
                Ok(self
                    .column_or_err(col)?
                    .fixed::<$n>(|t| matches!(t, $($pat)|+), stringify!($name))?
                    .map(<$t>::from_le_bytes))
            }
        )*

        /// The bytes of a CHAR, VARCHAR, BINARY or VARBINARY column as
        /// stored (CHAR and BINARY with their padding); `Ok(None)` when
        /// NULL. Errors: not in the row (`NoSuchColumn`), another type
        /// (`BadRequest`).
        #[inline]
        pub fn get_bytes(&self, col: u16) -> Result<Option<&[u8]>, $crate::ShoalError> {
            self.column_or_err(col)?.bytes("get_bytes")
        }

        /// The text of a CHAR (without padding spaces) or VARCHAR column;
        /// `Ok(None)` when NULL. Checks UTF-8 (the only cost that grows
        /// with the value). Errors: not in the row (`NoSuchColumn`),
        /// another type (`BadRequest`), bytes that are not UTF-8
        /// (`BadValue`: read them with [`Self::get_bytes`]).
        #[inline]
        pub fn get_str(&self, col: u16) -> Result<Option<&str>, $crate::ShoalError> {
            self.column_or_err(col)?.str("get_str")
        }

        /// The canonical bytes of column `col` whatever its type (see
        /// `shoal_types::value`: integers little-endian, CHAR padded…);
        /// `Ok(None)` when NULL. Comparing these with an expected
        /// encoding checks a value without decoding it. Errors: not in
        /// the row (`NoSuchColumn`).
        #[inline]
        pub fn get_raw(&self, col: u16) -> Result<Option<&[u8]>, $crate::ShoalError> {
            self.column_bytes(col)
                .ok_or_else(|| $crate::column_access::not_in_row(self.table_name(), col))
        }

        /// The value of the column with id `col` ([`Value::Null`] when
        /// NULL), or `None` when the row does not hold it. Allocates only
        /// for strings and bytes.
        #[inline]
        pub fn get_idx(&self, col: u16) -> Option<$crate::Value> {
            self.column(col).map($crate::column_access::Column::value)
        }
    };
}

pub(crate) use column_accessors;

/// Invokes [`column_accessors!`] with every typed accessor: its name, type,
/// byte width, what it reads, and the column types it accepts.
macro_rules! all_column_accessors {
    () => {
        $crate::column_access::column_accessors! {
            get_i8 -> i8, 1, "TINYINT", ($crate::ColumnType::TinyInt { unsigned: false });
            get_u8 -> u8, 1, "TINYINT UNSIGNED", ($crate::ColumnType::TinyInt { unsigned: true });
            get_i16 -> i16, 2, "SMALLINT", ($crate::ColumnType::SmallInt { unsigned: false });
            get_u16 -> u16, 2, "SMALLINT UNSIGNED", ($crate::ColumnType::SmallInt { unsigned: true });
            get_i32 -> i32, 4, "INT, or DATE in days since 1970-01-01",
                ($crate::ColumnType::Int { unsigned: false } | $crate::ColumnType::Date);
            get_u32 -> u32, 4, "INT UNSIGNED, or TIMESTAMP in seconds since 1970",
                ($crate::ColumnType::Int { unsigned: true } | $crate::ColumnType::Timestamp);
            get_i64 -> i64, 8, "BIGINT, DATETIME in seconds since 1970, or TIME in microseconds",
                ($crate::ColumnType::BigInt { unsigned: false }
                    | $crate::ColumnType::DateTime
                    | $crate::ColumnType::Time);
            get_u64 -> u64, 8, "BIGINT UNSIGNED", ($crate::ColumnType::BigInt { unsigned: true });
            get_f32 -> f32, 4, "FLOAT", ($crate::ColumnType::Float);
            get_f64 -> f64, 8, "DOUBLE", ($crate::ColumnType::Double);
        }
    };
}

pub(crate) use all_column_accessors;
