#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script).
# Formatting, lints, then every test: unit tests, property tests, the
# simulator (a bounded number of seeds; see README for more), and the
# integration tests that start real `shoal` processes on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*" >&2; }

if ! command -v cargo >/dev/null; then
    echo "cargo not found: install Rust from https://rustup.rs (stable, 1.85 or newer)" >&2
    exit 1
fi
for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
        step "installing $component"
        rustup component add "$component"
    fi
done

# The SQL node's tests run the stock MariaDB command-line client and
# sysbench, and compare Shoal with a MariaDB server (the corpus test,
# crates/cli/tests/sql_corpus.rs, starts a private mariadbd on a free
# port with a data dir of its own; a system service the package may
# start on install is not used).
if [[ $(id -u) -eq 0 ]]; then SUDO=; else SUDO=sudo; fi
install_package() { # install_package COMMAND PACKAGE WHY
    command -v "$1" >/dev/null && return
    step "installing $2 ($3)"
    if ! { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null 2>&1 ||
        { $SUDO apt-get update -q >/dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null; }; }; then
        echo "cannot install $2 with apt-get; install it (Debian: apt-get install $2) and run again" >&2
        exit 1
    fi
}
install_package mariadb mariadb-client "the SQL tests' client"
install_package sysbench sysbench "the SQL node's OLTP test"
# mariadbd is in /usr/sbin, which a non-root user's PATH may lack.
PATH=$PATH:/usr/sbin
install_package mariadbd mariadb-server "the server the SQL corpus test compares with"

# The Python MySQL clients (crates/cli/tests/sql_python.rs) in a venv of
# their own, so no system Python is touched; pinned so a new release
# cannot change what the tests check. Made once: reruns skip the install
# while the venv holds exactly the pinned versions.
PYENV=$PWD/target/pyenv
PYMYSQL=PyMySQL==1.1.1
MYSQL_CONNECTOR=mysql-connector-python==9.1.0
has_pins='import sys, importlib.metadata as m
sys.exit(any(m.version(n) != v for n, v in (a.split("==") for a in sys.argv[1:])))'
if ! "$PYENV/bin/python" -c "$has_pins" "$PYMYSQL" "$MYSQL_CONNECTOR" >/dev/null 2>&1; then
    step "installing $PYMYSQL and $MYSQL_CONNECTOR into target/pyenv (the Python client tests)"
    # Debian's python3 makes venvs only with python3-venv installed.
    if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null 2>&1 ||
            { $SUDO apt-get update -q >/dev/null &&
                $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null; } || true
    fi
    if ! { python3 -m venv "$PYENV" >/dev/null &&
        "$PYENV/bin/python" -m pip install -q --disable-pip-version-check "$PYMYSQL" "$MYSQL_CONNECTOR"; }; then
        echo "cannot install $PYMYSQL and $MYSQL_CONNECTOR into target/pyenv (needs python3 with venv and pip from PyPI; Debian: apt-get install python3-venv); fix that and run again" >&2
        exit 1
    fi
fi
export SHOAL_TEST_PYTHON=$PYENV/bin/python

# MariaDB Connector/J (crates/cli/tests/sql_jdbc.rs) from Maven Central into
# target/jdbc, pinned like the Python clients, and the dependency plugin
# pinned too so mvn resolves the same thing every time. The driver jar has
# no required dependencies; the test runs it with `java` in source-file
# mode (Java 11+), so needs a JDK but no build of its own. Fetched once.
JDBC_VERSION=3.5.1
JDBC_JAR=$PWD/target/jdbc/mariadb-java-client-$JDBC_VERSION.jar
if [[ ! -f $JDBC_JAR ]]; then
    step "fetching mariadb-java-client $JDBC_VERSION into target/jdbc (the JDBC client test)"
    if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then
        echo "the JDBC test needs java (17 or newer) and mvn; install them (Debian: apt-get install openjdk-17-jdk-headless maven) and run again" >&2
        exit 1
    fi
    # mvn prints its errors on stdout: keep all of it for a failure.
    if ! mvn_out=$(mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
        -Dartifact="org.mariadb.jdbc:mariadb-java-client:$JDBC_VERSION" \
        -DoutputDirectory="$PWD/target/jdbc" 2>&1) || [[ ! -f $JDBC_JAR ]]; then
        printf '%s\n' "$mvn_out" >&2
        echo "cannot fetch org.mariadb.jdbc:mariadb-java-client:$JDBC_VERSION with mvn (needs Maven Central); fix that and run again" >&2
        exit 1
    fi
fi
export SHOAL_TEST_JDBC_JAR=$JDBC_JAR

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test"
# The integration tests run the `shoal` binary that cargo builds for them.
cargo test --workspace --locked
