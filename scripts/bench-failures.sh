#!/usr/bin/env bash
# Node failures, measured (see docs/BENCHMARKS.md, "Node failures"):
#
#   ./scripts/bench-failures.sh                   # failover and node restart (~3 minutes)
#   BEFORE=1bb4ea5 ./scripts/bench-failures.sh    # also flexasynch R=1/R=2, this build
#                                                 # against BEFORE (built in a worktree)
#   PARTS="flex" BEFORE=1bb4ea5 ./scripts/bench-failures.sh   # only some parts
#                                                 # (failover, restart, flex)
#   FLEX_RUNS=5 ...                               # flexasynch runs per build (3)
#   BEFORE_BIN=path/to/shoal PARTS=flex ...       # compare with a built binary
#                                                 # instead of building BEFORE
#
# 1. Failover under load: 4 data nodes in two node groups of two (two per
#    core), `shoal bench bank` with a 100 ms timeline; data node 2 is
#    killed (kill -9) and started again 2 s later. A second run freezes
#    data node 3 (SIGSTOP) instead and thaws it 8 s later (it learns it is
#    out, stops, and is started again). Printed: throughput before, the
#    timeline around the failure, and the time from the failure until a
#    100 ms step is back above half of the throughput before.
# 2. Node restart: 2 data nodes, 2 replicas; flexasynch loads 3,000,000
#    rows of 100 bytes; the bank runs; data node 2 is killed and started
#    again, and copies its fragments from data node 1. Printed: the copy's
#    rows, bytes and rate (from data node 1's log) and the bank's
#    throughput while copying against before.
# 3. With BEFORE=<git rev> (or BEFORE_BIN): flexasynch on 2 data nodes with 1 and 2
#    replicas, FLEX_RUNS runs each, alternating this build and BEFORE.
#
# Raw outputs go to target/bench-failures/. Needs python3 for the timeline
# arithmetic.
set -euo pipefail
if [[ -n "${BEFORE_BIN:-}" ]]; then
    BEFORE_BIN=$(realpath -e "$BEFORE_BIN")
fi
cd "$(dirname "$0")/.."

OUT=target/bench-failures
mkdir -p "$OUT"
MGM_PORT=${MGM_PORT:-21286}
PARTS=${PARTS:-failover restart flex}
FLEX_RUNS=${FLEX_RUNS:-3}
want() { [[ " $PARTS " == *" $1 "* ]]; }
log() { printf '[bench-failures] %s\n' "$*" >&2; }

log "building shoal (release)"
cargo build --release -p shoal >&2
SHOAL=$PWD/target/release/shoal

PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do
        [[ -n "$p" ]] && kill -CONT "$p" 2>/dev/null || true
        [[ -n "$p" ]] && kill "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
trap cleanup EXIT

DATA=$(mktemp -d)
declare -A NODE_PID
# start_cluster BINARY DATA_NODES REPLICAS DATA_MEMORY
start_cluster() {
    local bin=$1 nodes=$2 replicas=$3 memory=$4
    cleanup
    PIDS=()
    rm -rf "${DATA:?}"/*
    {
        printf '[system]\ndata_dir = "%s"\n\n' "$DATA"
        printf '[datanode_defaults]\nno_of_replicas = %s\ndata_memory = "%s"\n\n' "$replicas" "$memory"
        printf '[[node]]\nnode_id = 49\ntype = "mgmd"\nhost = "127.0.0.1"\nport = %s\n' "$MGM_PORT"
        for id in $(seq "$nodes"); do
            printf '\n[[node]]\nnode_id = %s\ntype = "datanode"\nhost = "127.0.0.1"\n' "$id"
        done
    } >"$DATA/config.toml"
    $bin mgmd --config "$DATA/config.toml" >>"$OUT/mgmd.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do $bin mgm --connect 127.0.0.1:$MGM_PORT -e show >/dev/null 2>&1 && break; sleep 0.1; done
    for id in $(seq "$nodes"); do start_datanode "$bin" "$id"; done
    $bin mgm --connect 127.0.0.1:$MGM_PORT wait --timeout-secs 60 >&2
}
start_datanode() {
    local bin=$1 id=$2
    taskset -c $(( (id - 1) % 2 )) $bin datanode --connect 127.0.0.1:$MGM_PORT --node-id "$id" \
        >>"$OUT/datanode-$id.log" 2>&1 &
    NODE_PID[$id]=$!
    PIDS+=($!)
}
wait_started() {
    $SHOAL mgm --connect 127.0.0.1:$MGM_PORT wait --timeout-secs 120 >&2
}
bank() { # SECONDS JSON_OUT
    $SHOAL bench bank --connect 127.0.0.1:$MGM_PORT --accounts 10000 --threads 16 \
        --duration-secs "$1" --timeline-ms 100 --json >"$2" 2>"$2.err"
}
# bank_time JSON_OUT SECONDS: waits until the bank's own clock (its
# timeline lines on stderr) reaches SECONDS, so events land at a known
# point of its timeline.
bank_time() {
    while ! awk -v t="$2" '/^bank: t=/ { sub("t=", "", $2); if ($2 + 0 >= t) found = 1 } END { exit !found }' "$1.err" 2>/dev/null; do
        sleep 0.02
    done
}

# recovery JSON EVENT_MS: throughput before the event, and how long after it
# a 100 ms step is back above half of that.
recovery() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
event = int(sys.argv[2])
steps = report["timeline"]
before = [s["transfers"] for s in steps if 1000 <= s["t_ms"] <= event]
base = sum(before) / max(len(before), 1)
after = [s for s in steps if s["t_ms"] > event]
back = next((s["t_ms"] for s in after if s["transfers"] >= base / 2), None)
print(f"before: {base * 10:.0f} transfers/s ({base:.0f} per 100 ms step)")
print("timeline around the failure (ms after the bank started: transfers in that step):")
print("  " + "  ".join(f'{s["t_ms"]}:{s["transfers"]}' for s in steps if event - 300 <= s["t_ms"] <= event + 9000))
if back is None:
    print("never back above half")
else:
    print(f"back above half of before {back - event} ms after the failure (step ending at {back} ms)")
print(f'committed {report["committed"]}, aborted {report["aborted"]}, unknown {report["unknown"]}, '
      f'history verified {report["history_verified"]}, balances verified {report["balances_verified"]}, ok {report["ok"]}')
EOF
}

# ------------------------------------------------------- 1. failover
if want failover; then
log "failover: 4 data nodes, R=2, bank; kill -9 data node 2 at 6 s"
start_cluster "$SHOAL" 4 2 1G
bank 20 "$OUT/bank-kill.json" &
BANK=$!
bank_time "$OUT/bank-kill.json" 6
kill -9 "${NODE_PID[2]}"
sleep 2
start_datanode "$SHOAL" 2
wait "$BANK"
echo "== kill -9 of a data node (4 nodes, R=2), bank timeline in 100 ms steps"
recovery "$OUT/bank-kill.json" 6000 | tee "$OUT/failover-kill.txt"
wait_started
$SHOAL verify --connect 127.0.0.1:$MGM_PORT | tee -a "$OUT/failover-kill.txt"

log "failover: freeze (SIGSTOP) data node 3 at 6 s, thaw at 14 s"
start_cluster "$SHOAL" 4 2 1G
bank 24 "$OUT/bank-freeze.json" &
BANK=$!
bank_time "$OUT/bank-freeze.json" 6
kill -STOP "${NODE_PID[3]}"
sleep 8
kill -CONT "${NODE_PID[3]}"
# It learns it is out and stops; start it again, as a supervisor would.
for _ in $(seq 100); do kill -0 "${NODE_PID[3]}" 2>/dev/null || break; sleep 0.1; done
start_datanode "$SHOAL" 3
wait "$BANK"
echo "== SIGSTOP of a data node (4 nodes, R=2, heartbeat_interval_ms = 1500)"
recovery "$OUT/bank-freeze.json" 6000 | tee "$OUT/failover-freeze.txt"
wait_started
$SHOAL verify --connect 127.0.0.1:$MGM_PORT | tee -a "$OUT/failover-freeze.txt"

fi

# -------------------------------------------------- 2. node restart
if want restart; then
log "node restart: 2 data nodes, R=2, 3,000,000 rows of 100 bytes"
start_cluster "$SHOAL" 2 2 2G
$SHOAL bench flexasynch --connect 127.0.0.1:$MGM_PORT -t 1 -p 1000 -a 25 -o 3000 -l 1 --keep -dirty \
    >"$OUT/load.txt" 2>&1
bank 40 "$OUT/bank-restart.json" &
BANK=$!
bank_time "$OUT/bank-restart.json" 6
kill -9 "${NODE_PID[2]}"
bank_time "$OUT/bank-restart.json" 8
RESTART_AT=$(date +%s%3N)
start_datanode "$SHOAL" 2
wait_started
STARTED_AT=$(date +%s%3N)
wait "$BANK"
echo "== node restart: copy to data node 2 (from data node 1's log)"
grep -E "every fragment is copied to data node 2" "$OUT/datanode-1.log" | tail -1 | tee "$OUT/restart.txt"
python3 - "$OUT/bank-restart.json" 8000 $((STARTED_AT - RESTART_AT)) <<'EOF' | tee -a "$OUT/restart.txt"
import json, sys
report = json.load(open(sys.argv[1]))
restart, length = int(sys.argv[2]), int(sys.argv[3])
steps = report["timeline"]
def rate(lo, hi):
    s = [x["transfers"] for x in steps if lo < x["t_ms"] <= hi]
    return 10 * sum(s) / max(len(s), 1)
before = rate(1000, 6000)
during = rate(restart + 500, restart + length)
after = rate(restart + length + 500, restart + length + 10500)
print(f"bank before the failure: {before:.0f}/s; while data node 2 rejoined ({length} ms from its start to started): {during:.0f}/s = {100 * during / max(before, 1):.0f} %; after: {after:.0f}/s")
print("(while data node 2 is down or starting, every transaction is coordinated on data node 1, next to its primaries)")
print(f'committed {report["committed"]}, unknown {report["unknown"]}, ok {report["ok"]}')
EOF
$SHOAL verify --connect 127.0.0.1:$MGM_PORT | tee -a "$OUT/restart.txt"

fi

# ------------------------------------------ 3. flexasynch before/after
if want flex && [[ -n "${BEFORE:-}${BEFORE_BIN:-}" ]]; then
    if [[ -n "${BEFORE_BIN:-}" ]]; then
        OLD=$BEFORE_BIN
    else
        # shellcheck source=scripts/bench-common.sh
        source scripts/bench-common.sh
        OLD=$(build_before "$BEFORE")
    fi
    # -temp: the table is not logged (issue 9 costs apart; epochs still run).
    ARGS="-t 4 -con 4 -p 512 -a 2 -o 400 -l 3 -dirty -temp"
    rm -f "$OUT"/flex-*
    for replicas in 1 2; do
        for run in $(seq "$FLEX_RUNS"); do
            for which in new old; do
                bin=$SHOAL; [[ $which == old ]] && bin=$OLD
                start_cluster "$bin" 2 "$replicas" 2G
                $bin bench flexasynch --connect 127.0.0.1:$MGM_PORT $ARGS \
                    >"$OUT/flex-r$replicas-$which-$run.txt" 2>&1
            done
        done
        echo "== flexasynch $ARGS, 2 data nodes, $replicas replica(s): averages of $FLEX_RUNS runs each (runs in brackets), new against old"
        for op in insert update delete read; do
            runs() { for r in $(seq "$FLEX_RUNS"); do grep -h "^$op average" "$OUT/flex-r$replicas-$1-$r.txt" | awk '{sub("/s", "", $3); print $3}'; done; }
            python3 -c 'import sys
new = [int(x) for x in sys.argv[2].split()]
old = [int(x) for x in sys.argv[3].split()]
n, o = sum(new) / len(new), sum(old) / len(old)
print("%-6s new %9.0f %s  old %9.0f %s  %+.1f %%" % (sys.argv[1], n, new, o, old, 100 * (n / o - 1)))' "$op" "$(runs new)" "$(runs old)"
        done | tee "$OUT/flex-r$replicas.txt"
    done
fi
