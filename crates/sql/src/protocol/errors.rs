//! The errors the protocol layer itself answers, with MySQL's error
//! numbers and SQLSTATEs so that clients and connectors recognise them
//! (a connector decides to reconnect, retry or give up by these codes).

use crate::outcome::SqlError;

/// 1040: the server is at `ServerConfig::connections_max`.
pub(crate) fn too_many_connections() -> SqlError {
    SqlError::new(1040, "08004", "Too many connections")
}

/// 1043: a handshake the server cannot go on with.
pub(crate) fn bad_handshake(why: &str) -> SqlError {
    SqlError::new(1043, "08S01", format!("Bad handshake: {why}"))
}

/// 1045: unknown user, wrong password, or a host the account does not
/// allow. MySQL gives one answer for all three so that a client cannot
/// probe which user names exist.
pub(crate) fn access_denied(user: &str, host: &str, using_password: bool) -> SqlError {
    let using = if using_password { "YES" } else { "NO" };
    SqlError::new(
        1045,
        "28000",
        format!("Access denied for user '{user}'@'{host}' (using password: {using})"),
    )
}

/// 1047: a command byte Shoal does not serve.
pub(crate) fn unknown_command(command: u8) -> SqlError {
    SqlError::new(
        1047,
        "08S01",
        format!("Unknown command (0x{command:02x}): this server does not serve it"),
    )
}

/// 1053: the server is stopping.
pub(crate) fn server_shutdown() -> SqlError {
    SqlError::new(1053, "08S01", "Server shutdown in progress")
}

/// 1064: more than one statement in a query from a client that did not
/// ask for multi-statements (MySQL answers this as a syntax error too).
pub(crate) fn multi_statements_off() -> SqlError {
    SqlError::new(
        1064,
        "42000",
        "You have an error in your SQL syntax: more than one statement in one query, but this \
         connection did not enable multi-statements (CLIENT_MULTI_STATEMENTS); send one statement \
         per query or connect with multi-statements on",
    )
}

/// 1065: a query with no statement in it.
pub(crate) fn empty_query() -> SqlError {
    SqlError::new(1065, "42000", "Query was empty")
}

/// 1160: the answer could not be written (the client is gone); the
/// statement stops and the connection ends.
pub(crate) fn client_gone(why: impl std::fmt::Display) -> SqlError {
    SqlError::new(
        1160,
        "08S01",
        format!("Got an error writing communication packets: {why}"),
    )
}

/// 1105: a result the executor built that cannot be put on the wire (a
/// bug on the server's side, reported instead of sending garbage).
pub(crate) fn internal(message: impl Into<String>) -> SqlError {
    SqlError::new(1105, "HY000", format!("Internal error: {}", message.into()))
}

/// 1153: a packet (joined from its 16 MiB pieces) past `max_allowed_packet`.
pub(crate) fn packet_too_large() -> SqlError {
    SqlError::new(
        1153,
        "08S01",
        "Got a packet bigger than 'max_allowed_packet' bytes",
    )
}

/// 1156: a packet whose sequence id is not the next one.
pub(crate) fn packets_out_of_order(expected: u8, got: u8) -> SqlError {
    SqlError::new(
        1156,
        "08S01",
        format!("Got packets out of order (expected sequence id {expected}, got {got})"),
    )
}

/// 1159: the client stopped sending in the middle of a packet, or took
/// longer than the connect timeout to log in.
pub(crate) fn read_timeout(what: &str) -> SqlError {
    SqlError::new(
        1159,
        "08S01",
        format!("Got timeout reading communication packets ({what})"),
    )
}

/// 1210: a prepared statement executed with parameters it cannot take.
pub(crate) fn wrong_arguments(why: impl std::fmt::Display) -> SqlError {
    SqlError::new(
        1210,
        "HY000",
        format!("Incorrect arguments to mysqld_stmt_execute: {why}"),
    )
}

/// 1243: a statement id this connection never prepared (or closed).
pub(crate) fn unknown_statement(id: u32, command: &str) -> SqlError {
    SqlError::new(
        1243,
        "HY000",
        format!("Unknown prepared statement handler ({id}) given to {command}"),
    )
}

/// 1295: a prepared-statement command Shoal does not serve.
pub(crate) fn not_supported_in_prepared() -> SqlError {
    SqlError::new(
        1295,
        "HY000",
        "This command is not supported in the prepared statement protocol yet",
    )
}

/// 1300: a query that is not valid utf8mb4 (Shoal's only character set).
pub(crate) fn invalid_utf8(bytes: &[u8]) -> SqlError {
    let shown: String = bytes
        .iter()
        .take(16)
        .map(|b| format!("\\x{b:02X}"))
        .collect();
    SqlError::new(
        1300,
        "HY000",
        format!(
            "Invalid utf8mb4 character string: '{shown}': send statements in utf8mb4 \
             (binary values belong in X'..' literals or prepared-statement parameters)"
        ),
    )
}

/// 1421: `COM_STMT_FETCH` without a cursor (Shoal opens none: results
/// come back whole).
pub(crate) fn no_open_cursor(id: u32) -> SqlError {
    SqlError::new(
        1421,
        "HY000",
        format!("The statement ({id}) has no open cursor."),
    )
}

/// 1461: a connection at `ServerConfig::prepared_statements_max`.
pub(crate) fn too_many_prepared(max: usize) -> SqlError {
    SqlError::new(
        1461,
        "42000",
        format!(
            "Can't create more than max_prepared_stmt_count statements (current value: {max}); \
             close statements the client no longer uses"
        ),
    )
}

/// 1835: a packet whose content does not parse.
pub(crate) fn malformed(what: impl std::fmt::Display) -> SqlError {
    SqlError::new(
        1835,
        "HY000",
        format!("Malformed communication packet: {what}"),
    )
}

/// 4031: the connection was idle past `ServerConfig::wait_timeout`.
pub(crate) fn idle_timeout() -> SqlError {
    SqlError::new(
        4031,
        "HY000",
        "The client was disconnected by the server because of inactivity. See wait_timeout \
         and interactive_timeout for configuring this behavior.",
    )
}
