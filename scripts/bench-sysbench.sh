#!/usr/bin/env bash
# sysbench's OLTP workloads against Shoal's SQL node and against MariaDB
# with InnoDB, on this machine, in one run (see docs/BENCHMARKS.md, "SQL
# node: sysbench"):
#
#   ./scripts/bench-sysbench.sh                         # issue 12's figures
#   TIME=10 THREADS="8" ./scripts/bench-sysbench.sh     # a quicker pass
#   SYSTEMS=shoal TESTS=oltp_point_select ./scripts/bench-sysbench.sh
#
# Settings (environment):
#   TABLES, SIZE  sysbench --tables / --table-size (default 4 × 100000)
#   TESTS         workloads (default oltp_point_select oltp_read_only
#                 oltp_read_write)
#   THREADS       client threads, one run each (default "1 8 32")
#   TIME          seconds per run (default 30), after WARMUP seconds of
#                 the same workload (default 5) that are not counted
#   SYSTEMS       "shoal mariadb" (default both)
#   SHOAL_BIN     a shoal binary to run instead of building this tree
#   READ_BACKUP=0 Shoal's tables created with COMMENT='NDB_TABLE=READ_BACKUP=0'
#                 (reads from the primary only; by default the SQL node
#                 makes them READ_BACKUP, as NDB 8.0's ndb_read_backup)
#
# Shoal: `shoal up` with 2 data nodes × 2 replicas and 1 SQL node, default
# durability (every commit on both replicas in memory, redo synced by
# epoch). MariaDB: mariadbd from the Debian package (installed here if
# missing), a fresh data dir, InnoDB with a 2 GiB buffer pool (the data
# fits), default durability (innodb_flush_log_at_trx_commit=1: the log is
# flushed at every commit), no binary log (its default). Both listen on
# 127.0.0.1 only; sysbench connects over TCP to both. Everything runs on
# this machine's cores together (no pinning).
#
# Raw outputs go to target/bench-sysbench/; the summary table to stdout
# and target/bench-sysbench/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=target/bench-sysbench
mkdir -p "$OUT"
TABLES=${TABLES:-4}
SIZE=${SIZE:-100000}
TESTS=${TESTS:-oltp_point_select oltp_read_only oltp_read_write}
THREADS=${THREADS:-1 8 32}
TIME=${TIME:-30}
WARMUP=${WARMUP:-5}
SYSTEMS=${SYSTEMS:-shoal mariadb}
log() { printf '[bench-sysbench] %s\n' "$*" >&2; }

if [[ $(id -u) -eq 0 ]]; then SUDO=; else SUDO=sudo; fi
need() { # need COMMAND PACKAGE
    command -v "$1" >/dev/null && return
    log "installing $2"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null ||
        { $SUDO apt-get update -q >/dev/null &&
            $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" >/dev/null; }
}
need sysbench sysbench
need mariadb mariadb-client
[[ " $SYSTEMS " == *" mariadb "* ]] && need mariadbd mariadb-server

if [[ -n "${SHOAL_BIN:-}" ]]; then
    SHOAL=$SHOAL_BIN # a binary built before (say, of another commit)
else
    log "building shoal (release)"
    cargo build --release -p shoal >&2
    SHOAL=$PWD/target/release/shoal
fi

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

SERVER_PID=
DATA=
stop_server() {
    if [[ -n "$SERVER_PID" ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=
    fi
    if [[ -n "$DATA" ]]; then
        rm -rf "$DATA"
        DATA=
    fi
}
trap stop_server EXIT

wait_sql() { # wait_sql PORT: until the server answers a query
    for _ in $(seq 600); do
        mariadb --protocol=tcp -h 127.0.0.1 -P "$1" -u root -e 'SELECT 1' >/dev/null 2>&1 && return
        sleep 0.1
    done
    log "no SQL server answered on 127.0.0.1:$1 within 60 s"
    exit 1
}

start_shoal() {
    DATA=$(mktemp -d /tmp/shoal-bench-sysbench.XXXXXX)
    PORT=$(free_port)
    local mgm
    mgm=$(free_port)
    "$SHOAL" up --data-dir "$DATA/cluster" --data-nodes 2 --replicas 2 --mgm-port "$mgm" \
        --sql-nodes 1 --sql-port "$PORT" --data-memory 2G >>"$OUT/shoal-up.log" 2>&1 &
    SERVER_PID=$!
    wait_sql "$PORT"
    local tables=
    if [[ ${READ_BACKUP:-1} == 0 ]]; then tables=', tables not READ_BACKUP'; fi
    VERSION="Shoal $("$SHOAL" --version | awk '{print $2}') ($(git rev-parse --short HEAD)), 2 data nodes × 2 replicas + 1 SQL node$tables"
}

start_mariadb() {
    DATA=$(mktemp -d /tmp/mariadb-bench-sysbench.XXXXXX)
    PORT=$(free_port)
    mariadb-install-db --no-defaults --user=root --datadir="$DATA/data" \
        --auth-root-authentication-method=normal --skip-test-db >>"$OUT/mariadb-install.log" 2>&1
    mariadbd --no-defaults --user=root --datadir="$DATA/data" --socket="$DATA/sock" \
        --pid-file="$DATA/pid" --port="$PORT" --bind-address=127.0.0.1 --skip-name-resolve \
        --innodb-buffer-pool-size=2G --innodb-log-file-size=512M --max-connections=200 \
        --log-error="$PWD/$OUT/mariadb.err" >>"$OUT/mariadb.err" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 600); do [[ -S "$DATA/sock" ]] && break; sleep 0.1; done
    # The fresh server's root is root@localhost (socket); sysbench comes
    # over TCP from 127.0.0.1.
    mariadb -S "$DATA/sock" -u root -e \
        "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION"
    wait_sql "$PORT"
    VERSION="MariaDB $(mariadbd --version | awk '{print $3}'), InnoDB, buffer pool 2 GiB, innodb_flush_log_at_trx_commit=1"
}

SB=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=root --mysql-db=sbtest
    --tables="$TABLES" --table-size="$SIZE")

# field FILE PATTERN: the per-second figure of a sysbench summary line.
per_sec() { awk -v p="$2" '$0 ~ p { gsub(/[()]/, "", $3); print $3; exit }' "$1"; }
p95() { awk '/95th percentile:/ { print $3; exit }' "$1"; }
errors() { awk '/ignored errors:/ { print $3; exit }' "$1"; }

SUMMARY=$OUT/summary.md
: >"$OUT/rows.txt"
: >"$OUT/versions.txt"
for system in $SYSTEMS; do
    "start_$system"
    log "$VERSION on 127.0.0.1:$PORT"
    echo "$system: $VERSION" >>"$OUT/versions.txt"
    mariadb --protocol=tcp -h 127.0.0.1 -P "$PORT" -u root -e 'CREATE DATABASE sbtest'
    log "$system: prepare $TABLES tables × $SIZE rows"
    start=$(date +%s)
    engine=()
    if [[ $system == shoal && ${READ_BACKUP:-1} == 0 ]]; then
        # sysbench puts the engine into "/*! ENGINE = ... */" after the columns.
        engine=("--mysql_storage_engine=ndbcluster COMMENT='NDB_TABLE=READ_BACKUP=0'")
    fi
    sysbench oltp_read_write "${SB[@]}" --mysql-port="$PORT" "${engine[@]}" prepare >"$OUT/$system-prepare.txt" 2>&1
    log "$system: prepared in $(($(date +%s) - start)) s"
    for test in $TESTS; do
        for threads in $THREADS; do
            raw=$OUT/$system-$test-$threads.txt
            log "$system: $test, $threads thread(s), ${WARMUP} s warm-up + ${TIME} s"
            sysbench "$test" "${SB[@]}" --mysql-port="$PORT" --threads="$threads" \
                --time="$WARMUP" run >"$raw.warmup" 2>&1
            sysbench "$test" "${SB[@]}" --mysql-port="$PORT" --threads="$threads" \
                --time="$TIME" --percentile=95 run >"$raw" 2>&1 || {
                log "$system $test $threads failed: see $raw"
                tail -5 "$raw" >&2
                continue
            }
            echo "$system $test $threads $(per_sec "$raw" 'transactions:') $(per_sec "$raw" 'queries:') $(p95 "$raw") $(errors "$raw")" >>"$OUT/rows.txt"
        done
    done
    sysbench oltp_read_write "${SB[@]}" --mysql-port="$PORT" cleanup >"$OUT/$system-cleanup.txt" 2>&1
    stop_server
done

{
    echo "sysbench $(sysbench --version | awk '{print $2}'), --tables=$TABLES --table-size=$SIZE, ${TIME} s per run after ${WARMUP} s warm-up, $(nproc) cores, $(date -u +%Y-%m-%d)"
    cat "$OUT/versions.txt"
    echo
    echo "| workload | threads | system | tps | qps | p95 ms | errors |"
    echo "|---|---:|---|---:|---:|---:|---:|"
    sort -k2,2 -k3,3n -k1,1 "$OUT/rows.txt" |
        awk '{ printf "| %s | %s | %s | %s | %s | %s | %s |\n", $2, $3, $1, $4, $5, $6, $7 }'
    echo
    echo "Shoal ÷ MariaDB (tps; qps for point select):"
    echo
    echo "| workload | threads | ratio |"
    echo "|---|---:|---:|"
    awk '{ k = $2 " " $3; v = ($2 == "oltp_point_select") ? $5 : $4; x[$1, k] = v; keys[k] = 1 }
        END { for (k in keys) if (x["mariadb", k] > 0 && x["shoal", k] != "")
            { split(k, f, " "); printf "| %s | %s | %.2f |\n", f[1], f[2], x["shoal", k] / x["mariadb", k] } }' \
        "$OUT/rows.txt" | sort -t'|' -k2,2 -k3,3n
} | tee "$SUMMARY"
