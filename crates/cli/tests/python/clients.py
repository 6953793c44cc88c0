"""Two real Python MySQL clients against Shoal's SQL node (`shoal sql`).

Run by crates/cli/tests/sql_python.rs with the interpreter of the venv
that scripts/test.sh makes (PyMySQL and mysql-connector-python pinned):

    python clients.py PORT

- PyMySQL: the text protocol; its client-side escaping of parameters
  (quotes, backslashes, non-ASCII, NULL, negatives), executemany,
  lastrowid, transactions with autocommit off, MySQL's error codes as
  PyMySQL's exception classes, the connection usable after an error.
- mysql-connector-python in pure-Python mode: the binary protocol through
  server-side prepared statements (COM_STMT_PREPARE / EXECUTE), with NULL
  parameters, a parameter in LIMIT, aggregates and GROUP BY.

Every value read back is compared exactly with what Python expects; the
first mismatch ends the script with exit status 1 and a message naming
the check, what was sent and what came back. Checks where the SQL node is
known to answer differently from MySQL are marked `KNOWN MISMATCH` below.
"""

import sys
import traceback

import mysql.connector
import pymysql

HOST = "127.0.0.1"


class Mismatch(Exception):
    pass


def check(what, got, want):
    if got != want:
        raise Mismatch(f"{what}:\n  got  {got!r}\n  want {want!r}")


def expect_error(what, errno, run, exc_class=None):
    """Runs `run`, which must fail with MySQL error `errno` (and, when
    given, as an instance of `exc_class`)."""
    try:
        run()
    except Exception as e:  # the client's own error classes
        got = getattr(e, "errno", None)
        if got is None and e.args and isinstance(e.args[0], int):
            got = e.args[0]  # PyMySQL: args = (errno, message)
        check(f"{what}: error code ({e!r})", got, errno)
        if exc_class is not None and not isinstance(e, exc_class):
            raise Mismatch(f"{what}: raised {type(e).__name__}, want {exc_class.__name__}: {e!r}")
        return e
    raise Mismatch(f"{what}: succeeded, want error {errno}")


# Rows with the awkward values a client must escape (text protocol) or
# send typed (binary protocol): quotes, backslashes, non-ASCII, NULL,
# negative numbers, a DOUBLE that is not a short decimal.
ROWS = [
    ("plain", 1, 1.5),
    ("it's \"quoted\"", -7, -0.25),
    ("back\\slash \\' and \\n", None, 1e-3),
    ("héllo wörld ✓ 日本 🐟", 2147483647, 0.1),
    ("", -2147483648, -1234.5678),
    ("line\nbreak\ttab", 0, 0.0),
]


def pymysql_checks(port):
    conn = pymysql.connect(host=HOST, port=port, user="root", password="",
                           charset="utf8mb4", autocommit=True)
    cur = conn.cursor()
    cur.execute("CREATE DATABASE py_text")
    conn.select_db("py_text")
    cur.execute(
        "CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
        "name VARCHAR(60) NOT NULL, n INT, x DOUBLE NOT NULL)"
    )

    # One row first: lastrowid is the id AUTO_INCREMENT gave it.
    cur.execute("INSERT INTO t (name, n, x) VALUES (%s, %s, %s)", ROWS[0])
    check("pymysql: lastrowid of the first insert", cur.lastrowid, 1)
    check("pymysql: rowcount of the first insert", cur.rowcount, 1)

    # executemany with parameters escaped by PyMySQL (it folds the rows
    # into one multi-row INSERT).
    count = cur.executemany("INSERT INTO t (name, n, x) VALUES (%s, %s, %s)", ROWS[1:])
    check("pymysql: executemany's row count", count, len(ROWS) - 1)

    cur.execute("SELECT id, name, n, x FROM t ORDER BY id")
    want = [(i + 1,) + row for i, row in enumerate(ROWS)]
    check("pymysql: every row read back", list(cur.fetchall()), want)

    # A parameter in WHERE, escaped: the row with quotes and backslashes.
    for i, row in enumerate(ROWS):
        cur.execute("SELECT id, n FROM t WHERE name = %s", (row[0],))
        check(f"pymysql: SELECT by name {row[0]!r}", cur.fetchall(), ((i + 1, row[1]),))
    cur.execute("SELECT COUNT(*) FROM t WHERE n IS NULL")
    check("pymysql: rows with n NULL", cur.fetchone(), (1,))

    # An explicit id, then AUTO_INCREMENT goes on after it.
    cur.execute("INSERT INTO t (id, name, n, x) VALUES (%s, %s, %s, %s)", (100, "hundred", 100, 1.0))
    cur.execute("INSERT INTO t (name, n, x) VALUES (%s, %s, %s)", ("next", -1, -1.0))
    check("pymysql: lastrowid after an explicit id", cur.lastrowid, 101)

    # Transactions with autocommit off: one rolled back, one committed.
    conn.autocommit(False)
    cur.execute("UPDATE t SET n = %s WHERE id = %s", (555, 1))
    cur.execute("INSERT INTO t (name, n, x) VALUES (%s, %s, %s)", ("rolled back", 1, 1.0))
    cur.execute("SELECT n FROM t WHERE id = 1")
    check("pymysql: own uncommitted update seen", cur.fetchone(), (555,))
    conn.rollback()
    cur.execute("SELECT n FROM t WHERE id = 1")
    check("pymysql: update rolled back", cur.fetchone(), (1,))
    cur.execute("SELECT COUNT(*) FROM t WHERE name = %s", ("rolled back",))
    check("pymysql: insert rolled back", cur.fetchone(), (0,))
    conn.commit()

    cur.execute("UPDATE t SET n = %s WHERE id = %s", (777, 1))
    cur.execute("DELETE FROM t WHERE id = %s", (100,))
    conn.commit()
    conn.autocommit(True)

    # A second connection sees what was committed.
    other = pymysql.connect(host=HOST, port=port, user="root", password="",
                            database="py_text", charset="utf8mb4")
    with other.cursor() as c2:
        c2.execute("SELECT n FROM t WHERE id = 1")
        check("pymysql: committed update seen by another connection", c2.fetchone(), (777,))
        c2.execute("SELECT COUNT(*) FROM t WHERE id = 100")
        check("pymysql: committed delete seen by another connection", c2.fetchone(), (0,))
    other.close()

    # Errors as PyMySQL's exception classes with MySQL's codes; the
    # connection goes on after each.
    expect_error("pymysql: duplicate key", 1062,
                 lambda: cur.execute("INSERT INTO t (id, name, n, x) VALUES (%s, %s, %s, %s)",
                                     (1, "dup", 0, 0.0)),
                 pymysql.err.IntegrityError)
    expect_error("pymysql: unknown table", 1146,
                 lambda: cur.execute("SELECT * FROM no_such_table"),
                 pymysql.err.ProgrammingError)
    expect_error("pymysql: syntax error", 1064,
                 lambda: cur.execute("SELEKT 1"),
                 pymysql.err.ProgrammingError)
    cur.execute("SELECT name FROM t WHERE id = %s", (2,))
    check("pymysql: connection usable after errors", cur.fetchone(), (ROWS[1][0],))
    conn.ping(reconnect=False)
    conn.close()


def connector_checks(port):
    conn = mysql.connector.connect(host=HOST, port=port, user="root", password="",
                                   use_pure=True, autocommit=True)
    # The pure-Python implementation, not the C extension.
    check("connector: pure-Python connection class", type(conn).__name__, "MySQLConnection")
    cur = conn.cursor(prepared=True)
    # Server-side prepared statements (COM_STMT_PREPARE / EXECUTE, binary rows).
    check("connector: prepared cursor class", type(cur).__name__, "MySQLCursorPrepared")
    cur.execute("CREATE DATABASE py_bin")
    cur.execute("USE py_bin")
    cur.execute(
        "CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
        "name VARCHAR(60) NOT NULL, n INT, x DOUBLE NOT NULL)"
    )

    # Prepared INSERTs: values travel typed in COM_STMT_EXECUTE, NULL as
    # the null bitmap.
    insert = "INSERT INTO t (name, n, x) VALUES (%s, %s, %s)"
    for i, row in enumerate(ROWS):
        cur.execute(insert, row)
        check(f"connector: lastrowid of prepared insert {i + 1}", cur.lastrowid, i + 1)
    # executemany through the same prepared statement.
    more = [(f"many {i}", i * 10 - 5, i / 4) for i in range(10)]
    cur.executemany(insert, more)
    all_rows = ROWS + more

    cur.execute("SELECT id, name, n, x FROM t WHERE id >= %s ORDER BY id", (1,))
    want = [(i + 1,) + row for i, row in enumerate(all_rows)]
    check("connector: every row read back (binary rows)", [tuple(r) for r in cur.fetchall()], want)

    for i, row in enumerate(ROWS):
        cur.execute("SELECT id, n, x FROM t WHERE name = %s", (row[0],))
        check(f"connector: SELECT by name {row[0]!r}", [tuple(r) for r in cur.fetchall()],
              [(i + 1, row[1], row[2])])

    # NULL parameters: a comparison with NULL matches nothing; an UPDATE
    # sets NULL; IS NULL finds it.
    cur.execute("SELECT COUNT(*) FROM t WHERE n = %s", (None,))
    check("connector: n = NULL parameter matches nothing", tuple(cur.fetchone()), (0,))
    cur.execute("UPDATE t SET n = %s WHERE id = %s", (None, 1))
    cur.execute("SELECT id FROM t WHERE n IS NULL ORDER BY id")
    check("connector: rows with n NULL after a NULL parameter",
          [tuple(r) for r in cur.fetchall()], [(1,), (3,)])

    # A parameter in LIMIT (MySQL allows ? there in prepared statements).
    cur.execute("SELECT id FROM t ORDER BY id LIMIT %s", (3,))
    check("connector: LIMIT parameter", [tuple(r) for r in cur.fetchall()], [(1,), (2,), (3,)])
    cur.execute("SELECT id FROM t ORDER BY id DESC LIMIT %s, %s", (2, 2))
    n_rows = len(all_rows)
    check("connector: LIMIT offset, count parameters", [tuple(r) for r in cur.fetchall()],
          [(n_rows - 2,), (n_rows - 3,)])

    # Aggregates over a parameterized range. MySQL gives SUM of an INT as
    # DECIMAL; the connector turns it into Decimal, which compares equal to
    # an int of the same value.
    lo, hi = 7, 16
    cur.execute("SELECT COUNT(*), SUM(n) FROM t WHERE id BETWEEN %s AND %s", (lo, hi))
    count, total = cur.fetchone()
    in_range = [row for i, row in enumerate(all_rows) if lo <= i + 1 <= hi]
    check("connector: COUNT(*) over BETWEEN parameters", count, len(in_range))
    check("connector: SUM(n) over BETWEEN parameters", total, sum(r[1] for r in in_range))

    # GROUP BY with a parameter in the expression grouped by.
    cur.execute("SELECT id % %s AS k, COUNT(*), MIN(id), MAX(id) FROM t "
                "WHERE id > %s GROUP BY k ORDER BY k", (3, 6))
    groups = {}
    for i in range(len(all_rows)):
        row_id = i + 1
        if row_id > 6:
            g = groups.setdefault(row_id % 3, [0, row_id, row_id])
            g[0] += 1
            g[2] = row_id
    want = [(k, c, lo_, hi_) for k, (c, lo_, hi_) in sorted(groups.items())]
    check("connector: GROUP BY", [tuple(r) for r in cur.fetchall()], want)

    # Transactions through the prepared statements, autocommit off.
    conn.autocommit = False
    cur.execute("UPDATE t SET name = %s WHERE id = %s", ("changed", 2))
    conn.rollback()
    cur.execute("SELECT name FROM t WHERE id = %s", (2,))
    check("connector: update rolled back", tuple(cur.fetchone()), (ROWS[1][0],))
    cur.execute("UPDATE t SET name = %s WHERE id = %s", ("committed", 2))
    conn.commit()
    conn.autocommit = True
    cur.execute("SELECT name FROM t WHERE id = %s", (2,))
    check("connector: update committed", tuple(cur.fetchone()), ("committed",))

    # Errors from a prepared execute; the connection goes on.
    expect_error("connector: duplicate key", 1062,
                 lambda: cur.execute("INSERT INTO t (id, name, n, x) VALUES (%s, %s, %s, %s)",
                                     (1, "dup", 0, 0.0)),
                 mysql.connector.errors.IntegrityError)
    expect_error("connector: unknown table", 1146,
                 lambda: cur.execute("SELECT * FROM no_such_table WHERE id = %s", (1,)),
                 mysql.connector.errors.ProgrammingError)
    cur.execute("SELECT COUNT(*) FROM t WHERE id > %s", (0,))
    check("connector: connection usable after errors", tuple(cur.fetchone()), (len(all_rows),))

    # The text protocol of the same connection (a plain cursor).
    text = conn.cursor()
    text.execute("SELECT name, n FROM t WHERE id = %s", (4,))
    check("connector: text-protocol cursor", text.fetchall(), [(ROWS[3][0], ROWS[3][1])])
    text.close()
    cur.close()
    conn.close()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: clients.py PORT (the SQL node's MySQL port on 127.0.0.1)")
    port = int(sys.argv[1])
    failed = False
    for name, run in [("PyMySQL", pymysql_checks), ("mysql-connector-python", connector_checks)]:
        try:
            run(port)
            print(f"{name}: ok")
        except Mismatch as e:
            print(f"{name}: MISMATCH {e}", file=sys.stderr)
            failed = True
        except Exception:
            print(f"{name}: unexpected error", file=sys.stderr)
            traceback.print_exc()
            failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
