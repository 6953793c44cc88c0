#!/usr/bin/env bash
# Node restart with local files against a copy of every row, measured
# (docs/BENCHMARKS.md, "Node restart with local files"):
#
#   ./scripts/bench-node-restart.sh
#   ROWS=4000000 SHAPE="-a 25" BANK_SECS=10 ./scripts/bench-node-restart.sh
#   ROWS=2000000 SHAPE="-a 25 -s 10" REDO_LOG_SIZE=4G SETTLE_SECS=60 ./scripts/bench-node-restart.sh
#   (the seed's 2 GB table: flexasynch's update phase needs the log room)
#
# Two data nodes, two replicas (node 1 on core 0, node 2, mgmd and the
# clients on core 1), durability on, data dir on this machine's disk.
# 1. ROWS rows inserted with flexasynch (SHAPE, default -a 2; kept), then
#    SETTLE_SECS for checkpoints to cover them.
# 2. Node 2 killed (kill -9); `shoal bench bank` runs BANK_SECS against
#    node 1 alone (its own tables: changes the node misses); node 2
#    started again: it restores its own files, keeps those rows and
#    copies only what changed. Timed from process start to started.
# 3. The same kill, bank and start again with `--initial`: its files are
#    deleted and every row is copied. Same table, same cluster.
# Raw outputs go to target/bench-node-restart/; a summary to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=target/bench-node-restart
mkdir -p "$OUT"
MGM_PORT=${MGM_PORT:-21496}
ROWS=${ROWS:-2000000}
SHAPE=${SHAPE:-"-a 2"}
BANK_SECS=${BANK_SECS:-5}
SETTLE_SECS=${SETTLE_SECS:-15}
REDO_LOG_SIZE=${REDO_LOG_SIZE:-1G}
CHECKPOINT_RATE=${CHECKPOINT_RATE:-64M}
log() { printf '[bench-node-restart] %s\n' "$*" >&2; }

log "building shoal (release)"
cargo build --release -p shoal >&2
BIN=$PWD/target/release/shoal

PIDS=()
DN2=
cleanup() {
    for p in "${PIDS[@]:-}"; do
        [[ -n "$p" ]] && kill "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    PIDS=()
}
DATA=$(mktemp -d -p "$PWD/target")
trap 'cleanup; rm -rf "$DATA"' EXIT

{
    printf '[system]\ndata_dir = "%s"\n\n' "$DATA"
    printf '[datanode_defaults]\nno_of_replicas = 2\ndata_memory = "6G"\nredo_log_size = "%s"\ncheckpoint_bytes_per_sec = "%s"\n\n' "$REDO_LOG_SIZE" "$CHECKPOINT_RATE"
    printf '[[node]]\nnode_id = 49\ntype = "mgmd"\nhost = "127.0.0.1"\nport = %s\n' "$MGM_PORT"
    printf '\n[[node]]\nnode_id = 1\ntype = "datanode"\nhost = "127.0.0.1"\n'
    printf '\n[[node]]\nnode_id = 2\ntype = "datanode"\nhost = "127.0.0.1"\n'
} >"$DATA/config.toml"

mgm() { "$BIN" mgm --connect 127.0.0.1:$MGM_PORT "$@"; }

taskset -c 1 "$BIN" mgmd --config "$DATA/config.toml" >"$OUT/mgmd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do mgm -e show >/dev/null 2>&1 && break; sleep 0.1; done
taskset -c 0 "$BIN" datanode --connect 127.0.0.1:$MGM_PORT --node-id 1 >"$OUT/datanode-1.log" 2>&1 &
PIDS+=($!)
start_node2() {
    taskset -c 1 "$BIN" datanode --connect 127.0.0.1:$MGM_PORT --node-id 2 "$@" >"$OUT/datanode-2.$RUN.log" 2>&1 &
    DN2=$!
    PIDS+=($DN2)
}
RUN=load
start_node2
mgm wait --timeout-secs 600 >&2

rounds=$(( (ROWS + 4 * 512 - 1) / (4 * 512) ))
log "inserting $((rounds * 4 * 512)) rows ($SHAPE)"
# shellcheck disable=SC2086
taskset -c 1 "$BIN" bench flexasynch --connect 127.0.0.1:$MGM_PORT -t 4 -con 4 -p 512 $SHAPE -o "$rounds" --keep >"$OUT/insert.txt" 2>&1
log "waiting ${SETTLE_SECS}s for checkpoints"
sleep "$SETTLE_SECS"

# restart_node2 NAME [ARGS]: kill node 2, run the bank without it, start
# it again with ARGS; prints one summary block.
restart_node2() {
    RUN=$1
    shift
    log "$RUN: killing data node 2 (kill -9)"
    kill -KILL "$DN2"
    wait "$DN2" 2>/dev/null || true
    log "$RUN: bank for ${BANK_SECS}s on node 1 alone"
    taskset -c 1 "$BIN" bench bank --connect 127.0.0.1:$MGM_PORT --accounts 10000 --threads 4 \
        --duration-secs "$BANK_SECS" >"$OUT/bank.$RUN.txt" 2>&1
    local size
    size=$(find "$DATA/datanode-2" \( -name 'redo-*.log' -o -name 'lcp-*.ckpt' \) -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
    log "$RUN: starting data node 2 $*"
    local started ended
    started=$(date +%s.%N)
    start_node2 "$@"
    mgm wait --timeout-secs 600 >&2
    ended=$(date +%s.%N)
    local dnlog=$OUT/datanode-2.$RUN.log
    echo "== node 2 restart, $RUN ($size bytes of its own redo log and checkpoints before the start)"
    grep -h "restored .* row changes\|joined a running cluster\|copy done: [0-9]" "$dnlog" | sed 's/^data node 2: //' | grep -v "INFO" || true
    python3 -c "print(f'process start to started: {$ended - $started:.2f} s')"
}

restart_node2 own-files
restart_node2 initial --initial
echo "== president (node 1): the copies to node 2 (own files, then --initial)"
grep -h "every fragment is copied to data node 2" "$OUT/datanode-1.log" | grep -v INFO | sed 's/^data node 1: //' | tail -2 || true
