#!/usr/bin/env bash
# NDB's testReadPerf and the scan/index costs of issue 10, measured (see
# docs/BENCHMARKS.md, "Indexes and scans (issue 10)"):
#
#   ./scripts/bench-readperf.sh                      # everything, 1 M rows
#   SIZE=100000 FLEX_RUNS=1 ./scripts/bench-readperf.sh    # a quicker pass
#   PARTS="cases selectivity" ./scripts/bench-readperf.sh  # some parts only
#   JSON_OUT=target/bench-readperf/all.json ...      # also write the figures as JSON
#
# Parts (PARTS, default all of them):
#   cases        `shoal bench readperf -c -d` (SIZE rows, RANGE, ITERATIONS)
#                on one data node pinned to core 0 with the client on core
#                1, the same with both spinning (the data node's spin_us
#                DN_SPIN_US, default 200, the client's --spin-us
#                CLIENT_SPIN_US, default 100), then on two data nodes with
#                two replicas, unpinned, as created, then with
#                --read-backup and the client spinning; last, the data
#                nodes pinned (node 1 on core 0, node 2 on core 1) and
#                spinning, the client on core 1 spinning, READ_BACKUP, and
#                the client's neighbour node 1 (--neighbour 1: every read
#                and scan is coordinated and served on node 1; node 2 holds
#                the other replicas and sleeps, so the client takes its
#                core: on two cores, each poller gets one)
#   selectivity  a full scan keeping SELECTIVITY % of the rows, and an
#                ordered-index range scan of as many rows (one data node)
#   memory       data memory used by SIZE rows with no ordered index, with
#                PRIMARY, with PRIMARY and IDX_O, and with the unique IDX_U
#                too (one data node)
#   flexasynch   `flexasynch -t 4 -con 4 -p 512 -a 2 -temp` without indexes,
#                with `--ordered-index`, and with `--ordered-index
#                --unique-index`, FLEX_RUNS runs each, alternating (one
#                data node pinned to core 0, client on core 1)
#
# Clusters come from `shoal up --diskless` on 127.0.0.1, mgmd on a free
# port, in a fresh temporary directory each, stopped and deleted after.
# Raw outputs go to target/bench-readperf/; the summary to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=target/bench-readperf
mkdir -p "$OUT"
SIZE=${SIZE:-1000000}
RANGE=${RANGE:-1000}
ITERATIONS=${ITERATIONS:-3}
SELECTIVITY=${SELECTIVITY:-1}
FLEX_RUNS=${FLEX_RUNS:-2}
DN_SPIN_US=${DN_SPIN_US:-200}
CLIENT_SPIN_US=${CLIENT_SPIN_US:-100}
PARTS=${PARTS:-cases selectivity memory flexasynch}
log() { printf '[bench-readperf] %s\n' "$*" >&2; }
want() { [[ " $PARTS " == *" $1 "* ]]; }

log "building shoal (release)"
cargo build --release -p shoal >&2
SHOAL=$PWD/target/release/shoal

UP_PID=
DATA=
PORT=
stop_cluster() {
    if [[ -n "$UP_PID" ]]; then
        # `shoal up` stops mgmd and its data nodes on SIGTERM.
        kill "$UP_PID" 2>/dev/null || true
        wait "$UP_PID" 2>/dev/null || true
        UP_PID=
    fi
    if [[ -n "$DATA" ]]; then
        rm -rf "$DATA"
        DATA=
    fi
}
trap stop_cluster EXIT

free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# start_cluster NODES REPLICAS PIN(0|1) [SPIN_US]: a fresh diskless cluster.
start_cluster() {
    local nodes=$1 replicas=$2 pin=$3 spin=${4:-0}
    stop_cluster
    DATA=$(mktemp -d /tmp/shoal-bench-readperf.XXXXXX)
    PORT=$(free_port)
    local args=(--data-dir "$DATA" --data-nodes "$nodes" --replicas "$replicas"
        --mgm-port "$PORT" --diskless --data-memory 4G)
    [[ "$pin" == 1 ]] && args+=(--pin)
    args+=(--spin-us "$spin")
    "$SHOAL" up "${args[@]}" >>"$OUT/up.log" 2>&1 &
    UP_PID=$!
    for _ in $(seq 100); do
        "$SHOAL" mgm --connect 127.0.0.1:"$PORT" -e show >/dev/null 2>&1 && break
        sleep 0.1
    done
    "$SHOAL" mgm --connect 127.0.0.1:"$PORT" wait --timeout-secs 60 >&2
    log "cluster up: $nodes data node(s), $replicas replica(s), mgmd 127.0.0.1:$PORT, pinned=$pin, spin_us=$spin, load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

# Data memory used by data node 1, in bytes, as mgmd shows it (the nodes
# report every second: wait for a fresh report first).
memory_used() {
    sleep 2.5
    "$SHOAL" mgm --connect 127.0.0.1:"$PORT" -e show |
        awk '/^id=1 / { for (i = 1; i <= NF; i++) if ($i == "used") { print int($(i + 1) * 1048576); exit } }'
}
datanode_rss_kib() {
    awk '/^VmRSS:/ {print $2}' "/proc/$(cat "$DATA/datanode-1.pid")/status"
}

READPERF() { "$SHOAL" bench readperf --connect 127.0.0.1:"$PORT" "$@"; }

if want cases || want selectivity; then
    start_cluster 1 1 1
    if want cases; then
        log "readperf, 1 data node (core 0), client on core 1: -s $SIZE -r $RANGE -i $ITERATIONS"
        taskset -c 1 "$SHOAL" bench readperf --connect 127.0.0.1:"$PORT" -c -d \
            -s "$SIZE" -r "$RANGE" -i "$ITERATIONS" --json-file "$OUT/cases-1node.json" \
            >"$OUT/cases-1node.txt" 2>"$OUT/cases-1node.err"
        cat "$OUT/cases-1node.txt"
    else
        READPERF -c -d -s "$SIZE" -i 0 2>>"$OUT/load.err"
    fi
    if want selectivity; then
        log "full scan keeping $SELECTIVITY % against an index range of as many rows, 1 data node"
        taskset -c 1 "$SHOAL" bench readperf --connect 127.0.0.1:"$PORT" -s "$SIZE" \
            -i "$ITERATIONS" --scan-selectivity "$SELECTIVITY" \
            --json-file "$OUT/selectivity-1node.json" \
            >"$OUT/selectivity-1node.txt" 2>"$OUT/selectivity-1node.err"
        cat "$OUT/selectivity-1node.txt"
    fi
fi

if want cases; then
    start_cluster 1 1 1 "$DN_SPIN_US"
    log "readperf, 1 data node (core 0, spin_us $DN_SPIN_US), client on core 1 (--spin-us $CLIENT_SPIN_US)"
    taskset -c 1 "$SHOAL" bench readperf --connect 127.0.0.1:"$PORT" -c -d \
        -s "$SIZE" -r "$RANGE" -i "$ITERATIONS" --spin-us "$CLIENT_SPIN_US" \
        --json-file "$OUT/cases-1node-spin.json" \
        >"$OUT/cases-1node-spin.txt" 2>"$OUT/cases-1node-spin.err"
    cat "$OUT/cases-1node-spin.txt"
    start_cluster 2 2 0
    log "readperf, 2 data nodes, 2 replicas, unpinned: -s $SIZE -r $RANGE -i $ITERATIONS"
    READPERF -c -d -s "$SIZE" -r "$RANGE" -i "$ITERATIONS" \
        --json-file "$OUT/cases-2nodes.json" >"$OUT/cases-2nodes.txt" 2>"$OUT/cases-2nodes.err"
    cat "$OUT/cases-2nodes.txt"
    start_cluster 2 2 0
    log "readperf, 2 data nodes, 2 replicas, unpinned, READ_BACKUP, client --spin-us $CLIENT_SPIN_US"
    READPERF -c -d -s "$SIZE" -r "$RANGE" -i "$ITERATIONS" --read-backup \
        --spin-us "$CLIENT_SPIN_US" --json-file "$OUT/cases-2nodes-rb-spin.json" \
        >"$OUT/cases-2nodes-rb-spin.txt" 2>"$OUT/cases-2nodes-rb-spin.err"
    cat "$OUT/cases-2nodes-rb-spin.txt"
    start_cluster 2 2 1 "$DN_SPIN_US"
    log "readperf, 2 data nodes (cores 0 and 1, spin_us $DN_SPIN_US), 2 replicas, READ_BACKUP, client on core 1 --spin-us $CLIENT_SPIN_US --neighbour 1"
    taskset -c 1 "$SHOAL" bench readperf --connect 127.0.0.1:"$PORT" -c -d \
        -s "$SIZE" -r "$RANGE" -i "$ITERATIONS" --read-backup \
        --spin-us "$CLIENT_SPIN_US" --neighbour 1 --json-file "$OUT/cases-2nodes-neighbour.json" \
        >"$OUT/cases-2nodes-neighbour.txt" 2>"$OUT/cases-2nodes-neighbour.err"
    cat "$OUT/cases-2nodes-neighbour.txt"
fi

if want memory; then
    start_cluster 1 1 1
    : >"$OUT/memory.txt"
    for indexes in none primary ordered all; do
        m0=$(memory_used)
        r0=$(datanode_rss_kib)
        taskset -c 1 "$SHOAL" bench readperf --connect 127.0.0.1:"$PORT" -c -d -s "$SIZE" -i 0 \
            --indexes "$indexes" "READPERF_MEM_${indexes^^}" 2>>"$OUT/memory.err"
        m1=$(memory_used)
        r1=$(datanode_rss_kib)
        echo "$indexes $m0 $m1 $r0 $r1" >>"$OUT/memory.txt"
        log "--indexes $indexes: data memory used $m0 -> $m1 bytes, RSS $r0 -> $r1 KiB"
    done
    python3 - "$SIZE" "$OUT/memory.txt" <<'EOF'
import sys
rows = int(sys.argv[1])
m = {}
for line in open(sys.argv[2]):
    name, m0, m1, r0, r1 = line.split()
    m[name] = ((int(m1) - int(m0)) / rows, (int(r1) - int(r0)) * 1024 / rows)
print("== memory per row, %d rows of (KEY, A, B, C BINARY(8)), 1 data node" % rows)
for name in ("none", "primary", "ordered", "all"):
    print("%-8s data memory %6.1f B/row   RSS growth %6.1f B/row" % (name, *m[name]))
print("PRIMARY entry: %.1f B (data memory), %.1f B (RSS)" % tuple(m["primary"][i] - m["none"][i] for i in (0, 1)))
print("IDX_O entry:   %.1f B (data memory), %.1f B (RSS)" % tuple(m["ordered"][i] - m["primary"][i] for i in (0, 1)))
print("IDX_U entry:   %.1f B (data memory), %.1f B (RSS)" % tuple(m["all"][i] - m["ordered"][i] for i in (0, 1)))
EOF
fi

if want flexasynch; then
    FLEX_ARGS="-t 4 -con 4 -p 512 -a 2 -temp"
    for r in $(seq "$FLEX_RUNS"); do
        for variant in plain ordered both; do
            start_cluster 1 1 1
            extra=
            [[ $variant == ordered ]] && extra=--ordered-index
            [[ $variant == both ]] && extra="--ordered-index --unique-index"
            log "flexasynch $FLEX_ARGS $extra: run $r of $FLEX_RUNS"
            # shellcheck disable=SC2086
            taskset -c 1 "$SHOAL" bench flexasynch --connect 127.0.0.1:"$PORT" $FLEX_ARGS $extra \
                >"$OUT/flex-$variant-$r.txt" 2>&1
        done
    done
    echo "== flexasynch $FLEX_ARGS, 1 data node (core 0), client on core 1: average of $FLEX_RUNS runs (runs in brackets)"
    for op in insert update delete read; do
        runs() { for r in $(seq "$FLEX_RUNS"); do grep -h "^$op average" "$OUT/flex-$1-$r.txt" | awk '{sub("/s", "", $3); print $3}'; done; }
        python3 -c 'import sys
p = [int(x) for x in sys.argv[2].split()]
o = [int(x) for x in sys.argv[3].split()]
a, b = sum(p) / len(p), sum(o) / len(o)
u = [int(x) for x in sys.argv[4].split()]
c = sum(u) / len(u)
print("%-6s hash only %9.0f %s  + PRIMARY, IDX_COL1 %9.0f %s  %.0f %%  + UIX_COL1 too %9.0f %s  %.0f %%" % (sys.argv[1], a, p, b, o, 100 * b / a, c, u, 100 * c / a))' \
            "$op" "$(runs plain)" "$(runs ordered)" "$(runs both)"
    done
fi
stop_cluster

# The summary table, next to NDB 7.3's figures and the issue's targets.
if want cases; then
    python3 - "$OUT" "${JSON_OUT:-}" <<'EOF'
import json, os, sys
out, json_out = sys.argv[1], sys.argv[2]
ndb = {"serial pk": 20, "batch pk": 1.7, "serial unique": 21, "batch unique": 2.3,
       "index eq-bound": 21, "index range": 0.67, "index ordered": 0.33, "interpreted scan": 321}
serial = {"serial pk", "serial unique", "index eq-bound"}
shapes = {}
shape_names = ("1node", "1node-spin", "2nodes", "2nodes-rb-spin", "2nodes-neighbour")
for shape in shape_names:
    path = os.path.join(out, "cases-%s.json" % shape)
    if os.path.exists(path):
        shapes[shape] = json.load(open(path))
print("== us/row, average of the iterations [fastest iteration] (1 data node pinned | the same, both spinning | 2 data nodes, 2 replicas | the same, READ_BACKUP, client spinning | 2 data nodes pinned and spinning, READ_BACKUP, client spinning beside node 2, neighbour node 1), NDB 7.3, target (judged on the average)")
for case, ndb_us in ndb.items():
    target = ndb_us * (0.75 if case in serial else 0.5)
    cells = []
    for shape in shape_names:
        c = next((c for c in shapes.get(shape, {}).get("cases", []) if c["case"] == case), None)
        us = c and c["us_per_row"]
        cells.append("%8.2f [%8.2f] %-4s" % (us, c["best_us_per_row"], "met" if us <= target else "NOT")
                     if us is not None else "%24s" % "n/a")
    print("%-17s %s   NDB %6.2f  target <= %6.2f" % (case, " | ".join(cells), ndb_us, target))
if json_out:
    everything = {"cases": shapes}
    for name in ("selectivity-1node",):
        path = os.path.join(out, name + ".json")
        if os.path.exists(path):
            everything[name] = json.load(open(path))
    json.dump(everything, open(json_out, "w"), indent=1)
    print("JSON written to", json_out)
EOF
fi
