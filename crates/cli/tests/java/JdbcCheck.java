// A real JDBC driver (MariaDB Connector/J) against Shoal's SQL node.
//
// Run by crates/cli/tests/sql_jdbc.rs with the jar that scripts/test.sh
// fetches from Maven Central (pinned), in Java's source-file mode:
//
//     java -cp mariadb-java-client-3.x.y.jar JdbcCheck.java PORT
//
// With useServerPrepStmts=true every PreparedStatement goes through the
// binary protocol (COM_STMT_PREPARE / COM_STMT_EXECUTE): typed parameters
// with setString/setInt/setNull, generated keys from the OK packet,
// batches, results read back by type with wasNull. Then a transaction
// with autocommit off (a rollback that must undo, a commit that a second
// connection must see) and a duplicate key, which must raise an
// SQLException with MySQL's code 1062 and leave the connection usable.
//
// Every value read back is compared exactly; the first mismatch ends the
// program with exit status 1 and a message naming the check, what was
// sent and what came back. On success it prints "jdbc: ok" last.

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

public class JdbcCheck {
    static final class Mismatch extends Exception {
        Mismatch(String message) {
            super(message);
        }
    }

    static void check(String what, Object got, Object want) throws Mismatch {
        if (!Objects.equals(got, want)) {
            throw new Mismatch(what + ":\n  got  " + show(got) + "\n  want " + show(want));
        }
    }

    static String show(Object value) {
        if (value == null) {
            return "null";
        }
        if (value instanceof String) {
            return "\"" + value + "\" (String)";
        }
        return value + " (" + value.getClass().getSimpleName() + ")";
    }

    /** A row of the test table as Java sees it; n null is SQL NULL. */
    record Row(long id, String name, Integer n) {}

    // Values a driver must send typed: quotes, backslashes, non-ASCII,
    // NULL, the ends of INT's range, the empty string.
    static final String[] NAMES = {
        "plain", "it's \"quoted\"", "back\\slash \\' and \\n", "héllo wörld ✓ 日本 🐟", "", "line\nbreak\ttab",
    };
    static final Integer[] NUMBERS = {1, -7, null, Integer.MAX_VALUE, Integer.MIN_VALUE, 0};

    /** The driver's URL with its defaults but server-side prepared statements. */
    static String defaultUrl(int port) {
        return "jdbc:mariadb://127.0.0.1:" + port + "/?user=root&useServerPrepStmts=true";
    }

    /**
     * The URL the checks connect with: the driver's defaults, and
     * dumpQueriesOnException to put the statement into every
     * SQLException's message.
     */
    static String url(int port) {
        return defaultUrl(port) + "&dumpQueriesOnException=true";
    }

    public static void main(String[] args) {
        if (args.length != 1) {
            System.err.println("usage: java -cp mariadb-java-client.jar JdbcCheck.java PORT");
            System.exit(2);
        }
        int port = Integer.parseInt(args[0]);
        try {
            run(port);
        } catch (Mismatch e) {
            System.err.println("jdbc: MISMATCH " + e.getMessage());
            System.exit(1);
        } catch (SQLException e) {
            System.err.println("jdbc: unexpected SQLException (error code " + e.getErrorCode() + ", SQLSTATE "
                    + e.getSQLState() + "): " + e.getMessage());
            e.printStackTrace();
            System.exit(1);
        }
        System.out.println("jdbc: ok");
    }

    static void run(int port) throws SQLException, Mismatch {
        try (Connection conn = DriverManager.getConnection(url(port))) {
            try (Statement st = conn.createStatement()) {
                st.execute("CREATE DATABASE jdbc_check");
            }
            conn.setCatalog("jdbc_check");
            try (Statement st = conn.createStatement()) {
                st.execute("CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
                        + "name VARCHAR(60) NOT NULL, n INT)");
            }

            List<Row> rows = insertRows(conn);
            readBack(conn, rows);
            transaction(conn, port, rows);
            duplicateKey(conn, rows);
        }
        // Last, so that everything above is checked while it fails.
        connectWithDefaults(port);
    }

    /**
     * With its defaults (jdbcCompliantTruncation=true) Connector/J 3.5 sets
     * up each connection with one statement,
     *     set sql_mode=CONCAT(@@sql_mode,',STRICT_TRANS_TABLES'),NAMES utf8mb4
     * (NAMES as one item of a SET list, which MySQL accepts and sqlparser
     * does not: the SQL node's pre-router rewrites it). A refusal makes the
     * driver refuse the connection ("Initialization command fail").
     */
    static void connectWithDefaults(int port) throws Mismatch {
        try (Connection conn = DriverManager.getConnection(defaultUrl(port) + "&dumpQueriesOnException=true");
                Statement st = conn.createStatement();
                ResultSet rs = st.executeQuery("SELECT 1")) {
            check("connection with the driver's defaults: SELECT 1 returns a row", rs.next(), true);
            check("connection with the driver's defaults: SELECT 1", rs.getInt(1), 1);
        } catch (SQLException e) {
            Throwable cause = e;
            while (cause.getCause() != null) {
                cause = cause.getCause();
            }
            throw new Mismatch("connection with the driver's defaults (" + defaultUrl(port)
                    + ") refused: " + e.getMessage() + "\n  the SQL node's answer: " + cause.getMessage()
                    + "\n  (see connectWithDefaults in JdbcCheck.java)");
        }
    }

    /** Inserts every row; the ids are the generated keys the driver reports. */
    static List<Row> insertRows(Connection conn) throws SQLException, Mismatch {
        List<Row> rows = new ArrayList<>();
        String insert = "INSERT INTO t (name, n) VALUES (?, ?)";
        // One at a time with RETURN_GENERATED_KEYS: 1, 2, 3 from AUTO_INCREMENT.
        try (PreparedStatement ps = conn.prepareStatement(insert, Statement.RETURN_GENERATED_KEYS)) {
            for (int i = 0; i < 3; i++) {
                ps.setString(1, NAMES[i]);
                if (NUMBERS[i] == null) {
                    ps.setNull(2, Types.INTEGER);
                } else {
                    ps.setInt(2, NUMBERS[i]);
                }
                check("insert " + i + ": update count", ps.executeUpdate(), 1);
                try (ResultSet keys = ps.getGeneratedKeys()) {
                    check("insert " + i + ": a generated key", keys.next(), true);
                    long id = keys.getLong(1);
                    check("insert " + i + " (" + show(NAMES[i]) + "): generated key", id, (long) (i + 1));
                    check("insert " + i + ": one generated key only", keys.next(), false);
                    rows.add(new Row(id, NAMES[i], NUMBERS[i]));
                }
            }
        }
        // The rest as one batch: one update count of 1 per row.
        try (PreparedStatement ps = conn.prepareStatement(insert)) {
            for (int i = 3; i < NAMES.length; i++) {
                ps.setString(1, NAMES[i]);
                if (NUMBERS[i] == null) {
                    ps.setNull(2, Types.INTEGER);
                } else {
                    ps.setInt(2, NUMBERS[i]);
                }
                ps.addBatch();
            }
            int[] counts = ps.executeBatch();
            check("executeBatch: number of update counts", counts.length, NAMES.length - 3);
            for (int i = 0; i < counts.length; i++) {
                // The driver may report SUCCESS_NO_INFO (-2) for a batch
                // row; anything else but 1 is wrong.
                if (counts[i] != 1 && counts[i] != Statement.SUCCESS_NO_INFO) {
                    check("executeBatch: update count of row " + i, counts[i], 1);
                }
            }
        }
        for (int i = 3; i < NAMES.length; i++) {
            rows.add(new Row(i + 1, NAMES[i], NUMBERS[i]));
        }
        return rows;
    }

    /** Reads one row by id through a prepared statement; null if absent. */
    static Row rowById(Connection conn, long id) throws SQLException, Mismatch {
        try (PreparedStatement ps = conn.prepareStatement("SELECT id, name, n FROM t WHERE id = ?")) {
            ps.setLong(1, id);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    return null;
                }
                Row row = readRow(rs);
                check("SELECT by id " + id + ": one row only", rs.next(), false);
                return row;
            }
        }
    }

    static Row readRow(ResultSet rs) throws SQLException {
        long id = rs.getLong("id");
        String name = rs.getString("name");
        int n = rs.getInt("n");
        return new Row(id, name, rs.wasNull() ? null : n);
    }

    static void readBack(Connection conn, List<Row> rows) throws SQLException, Mismatch {
        // Every row, in order, through a statement with a parameter.
        try (PreparedStatement ps = conn.prepareStatement("SELECT id, name, n FROM t WHERE id >= ? ORDER BY id")) {
            ps.setInt(1, 1);
            try (ResultSet rs = ps.executeQuery()) {
                List<Row> got = new ArrayList<>();
                while (rs.next()) {
                    got.add(readRow(rs));
                }
                check("every row read back", got, rows);
            }
        }
        // Each row by its name (a string parameter with quotes, backslashes,
        // non-ASCII) and by its id.
        try (PreparedStatement ps = conn.prepareStatement("SELECT id, name, n FROM t WHERE name = ?")) {
            for (Row want : rows) {
                ps.setString(1, want.name());
                try (ResultSet rs = ps.executeQuery()) {
                    List<Row> got = new ArrayList<>();
                    while (rs.next()) {
                        got.add(readRow(rs));
                    }
                    check("SELECT by name " + show(want.name()), got, List.of(want));
                }
                check("SELECT by id " + want.id(), rowById(conn, want.id()), want);
            }
        }
        // NULL as a value read back: the one row whose n is NULL.
        try (PreparedStatement ps = conn.prepareStatement("SELECT n FROM t WHERE n IS NULL AND id > ?")) {
            ps.setInt(1, 0);
            try (ResultSet rs = ps.executeQuery()) {
                check("SELECT n IS NULL: a row", rs.next(), true);
                check("SELECT n IS NULL: getInt of NULL", rs.getInt(1), 0);
                check("SELECT n IS NULL: wasNull", rs.wasNull(), true);
                check("SELECT n IS NULL: getObject of NULL", rs.getObject(1), null);
                check("SELECT n IS NULL: one row only", rs.next(), false);
            }
        }
        // Two parameters and an aggregate.
        try (PreparedStatement ps = conn.prepareStatement("SELECT COUNT(*) FROM t WHERE n > ? AND n < ?")) {
            ps.setInt(1, -10);
            ps.setInt(2, 10);
            try (ResultSet rs = ps.executeQuery()) {
                check("COUNT(*) with -10 < n < 10: a row", rs.next(), true);
                check("COUNT(*) with -10 < n < 10", rs.getLong(1), 3L);
            }
        }
    }

    static void transaction(Connection conn, int port, List<Row> rows) throws SQLException, Mismatch {
        Row first = rows.get(0);
        String update = "UPDATE t SET n = ? WHERE id = ?";

        conn.setAutoCommit(false);
        try (PreparedStatement ps = conn.prepareStatement(update)) {
            ps.setInt(1, 555);
            ps.setLong(2, first.id());
            check("transaction: update count (to be rolled back)", ps.executeUpdate(), 1);
        }
        check("transaction: own uncommitted update seen", rowById(conn, first.id()),
                new Row(first.id(), first.name(), 555));
        conn.rollback();
        check("transaction: update rolled back", rowById(conn, first.id()), first);

        try (PreparedStatement ps = conn.prepareStatement(update)) {
            ps.setInt(1, 777);
            ps.setLong(2, first.id());
            check("transaction: update count (to be committed)", ps.executeUpdate(), 1);
        }
        try (PreparedStatement ps = conn.prepareStatement("DELETE FROM t WHERE id = ?")) {
            ps.setLong(1, rows.get(1).id());
            check("transaction: delete count (to be committed)", ps.executeUpdate(), 1);
        }
        conn.commit();
        conn.setAutoCommit(true);

        Row updated = new Row(first.id(), first.name(), 777);
        try (Connection other = DriverManager.getConnection(url(port))) {
            other.setCatalog("jdbc_check");
            check("transaction: committed update seen by another connection", rowById(other, first.id()), updated);
            check("transaction: committed delete seen by another connection", rowById(other, rows.get(1).id()),
                    null);
        }
        rows.set(0, updated);
        rows.remove(1);
    }

    static void duplicateKey(Connection conn, List<Row> rows) throws SQLException, Mismatch {
        Row first = rows.get(0);
        try (PreparedStatement ps = conn.prepareStatement("INSERT INTO t (id, name, n) VALUES (?, ?, ?)")) {
            ps.setLong(1, first.id());
            ps.setString(2, "dup");
            ps.setNull(3, Types.INTEGER);
            try {
                ps.executeUpdate();
                throw new Mismatch("duplicate key: INSERT of id " + first.id() + " succeeded, want error 1062");
            } catch (SQLException e) {
                check("duplicate key: error code (" + e.getMessage() + ")", e.getErrorCode(), 1062);
                check("duplicate key: SQLSTATE (" + e.getMessage() + ")", e.getSQLState(), "23000");
            }
        }
        // The connection goes on: the row is unchanged and a new one inserts.
        check("after the duplicate key: connection still valid", conn.isValid(5), true);
        check("after the duplicate key: row unchanged", rowById(conn, first.id()), first);
        try (PreparedStatement ps = conn.prepareStatement("INSERT INTO t (name, n) VALUES (?, ?)",
                Statement.RETURN_GENERATED_KEYS)) {
            ps.setString(1, "after");
            ps.setInt(2, 42);
            check("after the duplicate key: insert count", ps.executeUpdate(), 1);
            try (ResultSet keys = ps.getGeneratedKeys()) {
                check("after the duplicate key: a generated key", keys.next(), true);
                long id = keys.getLong(1);
                check("after the duplicate key: row inserted", rowById(conn, id), new Row(id, "after", 42));
            }
        }
    }
}
