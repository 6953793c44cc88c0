#!/usr/bin/env bash
# Shoal vs Redis, side by side in one run, on this machine (see
# docs/BENCHMARKS.md for the figures and how to read them).
#
#   ./scripts/bench.sh            # full run (~7 minutes)
#   QUICK=1 ./scripts/bench.sh    # smaller counts, for a smoke test
#
# Layout (2 cores): the server (Shoal's data node, or redis-server) is
# pinned to core 0, the load generator (flexasynch, or redis-benchmark) to
# core 1. mgmd is idle during the run and floats.
#
# Installs redis-server and redis-tools with apt if they are missing.
# Writes raw outputs to target/bench/ and a summary to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=target/bench
mkdir -p "$OUT"
SERVER_CORE=${SERVER_CORE:-0}
CLIENT_CORE=${CLIENT_CORE:-1}
MGM_PORT=${MGM_PORT:-21186}
REDIS_PORT=${REDIS_PORT:-26379}
if [[ -n "${QUICK:-}" ]]; then
    ROUNDS=50; LOOPS=2; MEM_ROWS=100000; LAT_N=2000; REDIS_N=200000; BANK_SECS=3
else
    ROUNDS=400; LOOPS=3; MEM_ROWS=1000000; LAT_N=20000; REDIS_N=4000000; BANK_SECS=20
fi

log() { printf '[bench] %s\n' "$*" >&2; }

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    log "installing redis-server and redis-tools (apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq redis-server redis-tools >/dev/null
fi

log "building shoal (release)"
cargo build --release -p shoal >&2
SHOAL=target/release/shoal

PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do
        [[ -n "$p" ]] && kill "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
trap cleanup EXIT

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# ---------------------------------------------------------------- Shoal
DATA=$(mktemp -d)
NODE_PID=
# start_cluster SPIN_US [DATA_NODES REPLICAS]: mgmd and the data nodes.
# One data node is pinned to the server core; with more, data node N is
# pinned to core (N-1) mod 2 and the load generator floats.
NODES=1
start_cluster() {
    local spin=$1
    NODES=${2:-1}
    local replicas=${3:-1}
    rm -rf "${DATA:?}"/*
    {
        printf '[system]\ndata_dir = "%s"\n\n' "$DATA"
        printf '[datanode_defaults]\nno_of_replicas = %s\ndata_memory = "%s"\nspin_us = %s\n\n' \
            "$replicas" "$([[ $NODES -gt 1 ]] && echo 2G || echo 4G)" "$spin"
        printf '[[node]]\nnode_id = 49\ntype = "mgmd"\nhost = "127.0.0.1"\nport = %s\n' "$MGM_PORT"
        for id in $(seq "$NODES"); do
            printf '\n[[node]]\nnode_id = %s\ntype = "datanode"\nhost = "127.0.0.1"\n' "$id"
        done
    } >"$DATA/config.toml"
    $SHOAL mgmd --config "$DATA/config.toml" >>"$OUT/mgmd.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do $SHOAL mgm --connect 127.0.0.1:$MGM_PORT -e show >/dev/null 2>&1 && break; sleep 0.1; done
    for id in $(seq "$NODES"); do start_datanode "$id"; done
    $SHOAL mgm --connect 127.0.0.1:$MGM_PORT wait --timeout-secs 30 >&2
}
start_datanode() {
    local id=${1:-1}
    local core=$SERVER_CORE
    [[ $NODES -gt 1 ]] && core=$(( (id - 1) % 2 ))
    taskset -c "$core" $SHOAL datanode --connect 127.0.0.1:$MGM_PORT --node-id "$id" >>"$OUT/datanode-$id.log" 2>&1 &
    NODE_PID=$!
    PIDS+=($NODE_PID)
}

FLEX="taskset -c $CLIENT_CORE $SHOAL bench flexasynch --connect 127.0.0.1:$MGM_PORT"
# Four threads with a connection each keep the data node busy while each
# thread waits for its batch (flexAsynch's execute-all-then-poll rounds).
THROUGHPUT_ARGS="-t 4 -con 4 -p 512 -a 2"

log "shoal: data node on core $SERVER_CORE, default config (spin_us = 0)"
start_cluster 0
log "flexasynch throughput: $THROUGHPUT_ARGS -o $ROUNDS -l $LOOPS -dirty"
$FLEX $THROUGHPUT_ARGS -o "$ROUNDS" -l "$LOOPS" -dirty | tee "$OUT/flexasynch.txt"

log "flexasynch serial latency: one single-read transaction in flight"
$FLEX -t 1 -p 1 -c 1 -a 2 -o "$LAT_N" -dirty --latency | tee "$OUT/flexasynch-latency.txt"

log "memory: $MEM_ROWS rows of -a 2 (8 bytes) into a freshly started data node"
kill "$NODE_PID"; wait "$NODE_PID" 2>/dev/null || true
start_datanode 1
$SHOAL mgm --connect 127.0.0.1:$MGM_PORT wait --timeout-secs 30 >&2
sleep 1
RSS0=$(rss_kib $NODE_PID)
$FLEX -t 1 -p 1000 -a 2 -o "$((MEM_ROWS / 1000))" -l 1 --keep -dirty >"$OUT/flexasynch-memory.txt" 2>&1
sleep 1
RSS1=$(rss_kib $NODE_PID)
SHOAL_BPR=$(( (RSS1 - RSS0) * 1024 / MEM_ROWS ))
$SHOAL mgm --connect 127.0.0.1:$MGM_PORT -e show | tee "$OUT/show-after-memory.txt" >&2
cleanup
PIDS=()

log "shoal: the same with spin_us = 200 (the data node polls 200 us before sleeping)"
start_cluster 200
$FLEX -t 1 -p 1 -c 1 -a 2 -o "$LAT_N" -dirty --latency | tee "$OUT/flexasynch-latency-spin.txt"
$FLEX $THROUGHPUT_ARGS -o "$ROUNDS" -l "$LOOPS" -dirty | tee "$OUT/flexasynch-spin.txt"
cleanup
PIDS=()

# ---------------------------------------------------------------- Many data nodes
# Two data nodes, one per core, the load generator floating; then four.
FLEX_FREE="$SHOAL bench flexasynch --connect 127.0.0.1:$MGM_PORT"
log "2 data nodes, 1 replica: flexasynch $THROUGHPUT_ARGS"
start_cluster 0 2 1
$FLEX_FREE $THROUGHPUT_ARGS -o "$ROUNDS" -l "$LOOPS" -dirty | tee "$OUT/flexasynch-2n-r1.txt"
cleanup
PIDS=()
log "2 data nodes, 2 replicas: flexasynch $THROUGHPUT_ARGS, then serial latency"
start_cluster 0 2 2
$FLEX_FREE $THROUGHPUT_ARGS -o "$ROUNDS" -l "$LOOPS" -dirty | tee "$OUT/flexasynch-2n-r2.txt"
$FLEX_FREE -t 1 -p 1 -c 1 -a 2 -o "$LAT_N" -dirty --latency | tee "$OUT/flexasynch-2n-r2-latency.txt"
cleanup
PIDS=()
log "4 data nodes, 2 replicas: shoal bench bank"
start_cluster 0 4 2
$SHOAL bench bank --connect 127.0.0.1:$MGM_PORT --accounts 10000 --threads 16 \
    --duration-secs "$BANK_SECS" --check-every-secs 5 | tee "$OUT/bank-4n-r2.txt"
cleanup
PIDS=()

# ---------------------------------------------------------------- Redis
log "starting redis-server on core $SERVER_CORE"
taskset -c "$SERVER_CORE" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize no >"$OUT/redis.log" 2>&1 &
REDIS_PID=$!
PIDS+=($REDIS_PID)
for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
RB="taskset -c $CLIENT_CORE redis-benchmark -h 127.0.0.1 -p $REDIS_PORT"

log "redis-benchmark -P 64 -c 50 -d 8 -t set,get"
$RB -P 64 -c 50 -d 8 -t set,get -n "$REDIS_N" -r 1000000 --csv | tee "$OUT/redis-pipelined.csv"
log "redis-benchmark serial latency: -c 1 -P 1 -t get"
$RB -c 1 -P 1 -d 8 -t get -n "$LAT_N" -r 1000000 --csv | tee "$OUT/redis-latency.csv"

cleanup
PIDS=()

log "redis memory: $MEM_ROWS keys of 8-byte values into a freshly started redis-server"
# DEBUG POPULATE is off by default since Redis 7.
taskset -c "$SERVER_CORE" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --enable-debug-command yes --daemonize no >>"$OUT/redis.log" 2>&1 &
REDIS_PID=$!
PIDS+=($REDIS_PID)
for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
R0=$(rss_kib $REDIS_PID)
redis-cli -p "$REDIS_PORT" debug populate "$MEM_ROWS" key 8 | grep -q OK || { log "DEBUG POPULATE failed"; exit 1; }
R1=$(rss_kib $REDIS_PID)
REDIS_BPK=$(( (R1 - R0) * 1024 / MEM_ROWS ))
cleanup
PIDS=()

# ---------------------------------------------------------------- summary
csv_field() { # file test column
    awk -F, -v t="\"$2\"" -v c="$3" 'NR==1 {for (i=1;i<=NF;i++) if ($i=="\""c"\"") col=i} $1==t {gsub(/"/,"",$col); print $col}' "$1"
}
echo
echo "== summary ($(nproc) cores; server on core $SERVER_CORE, client on core $CLIENT_CORE)"
grep -E '^(insert|update|delete|read) average' "$OUT/flexasynch.txt" | sed 's/^/shoal flexasynch  /'
echo "redis -P 64 -c 50   SET $(csv_field "$OUT/redis-pipelined.csv" SET rps)/s  GET $(csv_field "$OUT/redis-pipelined.csv" GET rps)/s"
grep -E '^read latency' "$OUT/flexasynch-latency.txt" | sed 's/^/shoal serial       /'
grep -E '^read latency' "$OUT/flexasynch-latency-spin.txt" | sed 's/^/shoal serial spin  /'
grep -E '^(insert|update|delete|read) average' "$OUT/flexasynch-spin.txt" | sed 's/^/shoal spin        /'
echo "redis serial GET    p50: $(csv_field "$OUT/redis-latency.csv" GET p50_latency_ms)ms p99: $(csv_field "$OUT/redis-latency.csv" GET p99_latency_ms)ms"
for f in 2n-r1 2n-r2; do
    grep -E '^(insert|update|delete|read) average' "$OUT/flexasynch-$f.txt" | sed "s/^/shoal $f         /"
done
grep -E '^update latency' "$OUT/flexasynch-2n-r2-latency.txt" | sed 's/^/shoal 2n-r2 serial  /'
grep -E '^bank:' "$OUT/bank-4n-r2.txt" | sed 's/^/shoal 4n-r2       /'
echo "memory per row      shoal: ${SHOAL_BPR} B (RSS growth / $MEM_ROWS rows)  redis: ${REDIS_BPK} B (RSS growth / $MEM_ROWS keys)"
rm -rf "$DATA"
