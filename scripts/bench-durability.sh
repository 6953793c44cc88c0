#!/usr/bin/env bash
# Durability, measured (see docs/BENCHMARKS.md, "Durability"):
#
#   ./scripts/bench-durability.sh                 # every part
#   PARTS="writes latency restart" RUNS=3 ROWS=1000000 ./scripts/bench-durability.sh
#
# One data node pinned to core 0, the client (and mgmd) on core 1, redo
# log and sysfile in a temporary data dir on this machine's disk.
# - writes: flexasynch -t 4 -con 4 -p 512 (-a 2 and -a 25), a logged table
#   against a -temp (not logged) one, alternating, RUNS runs each; the
#   redo log's size after each logged run (bytes per row change).
# - latency: serial single-row transactions (-t 1 -p 1 -o LAT_ROUNDS -a 2),
#   with and without durable commits: p50/p99 per phase.
# - restart: ROWS rows inserted (-a 2, kept), the data node stopped (a
#   clean stop, SIGTERM) and started again: the time its restore took.
# Raw outputs go to target/bench-durability/; a summary to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=target/bench-durability
mkdir -p "$OUT"
MGM_PORT=${MGM_PORT:-21486}
RUNS=${RUNS:-3}
ROWS=${ROWS:-1000000}
LAT_ROUNDS=${LAT_ROUNDS:-300}
PARTS=${PARTS:-"writes latency restart"}
log() { printf '[bench-durability] %s\n' "$*" >&2; }

log "building shoal (release)"
cargo build --release -p shoal >&2
BIN=$PWD/target/release/shoal

PIDS=()
DN=
cleanup() {
    for p in "${PIDS[@]:-}"; do
        [[ -n "$p" ]] && kill "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    PIDS=()
    DN=
}
DATA=$(mktemp -d -p "$PWD/target")
trap 'cleanup; rm -rf "$DATA"' EXIT

# start_cluster [FRESH]: mgmd (core 1) and one data node (core 0) on
# $DATA; FRESH=1 wipes the data dir first.
start_cluster() {
    cleanup
    if [[ "${1:-0}" == 1 ]]; then
        rm -rf "${DATA:?}"/*
    fi
    {
        printf '[system]\ndata_dir = "%s"\n\n' "$DATA"
        printf '[datanode_defaults]\nno_of_replicas = 1\ndata_memory = "8G"\n\n'
        printf '[[node]]\nnode_id = 49\ntype = "mgmd"\nhost = "127.0.0.1"\nport = %s\n' "$MGM_PORT"
        printf '\n[[node]]\nnode_id = 1\ntype = "datanode"\nhost = "127.0.0.1"\n'
    } >"$DATA/config.toml"
    taskset -c 1 "$BIN" mgmd --config "$DATA/config.toml" >>"$OUT/mgmd.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do "$BIN" mgm --connect 127.0.0.1:$MGM_PORT -e show >/dev/null 2>&1 && break; sleep 0.1; done
    taskset -c 0 "$BIN" datanode --connect 127.0.0.1:$MGM_PORT --node-id 1 >>"$OUT/datanode.log" 2>&1 &
    DN=$!
    PIDS+=($DN)
    "$BIN" mgm --connect 127.0.0.1:$MGM_PORT wait --timeout-secs 600 >&2
}

flex() {
    # shellcheck disable=SC2086
    taskset -c 1 "$BIN" bench flexasynch --connect 127.0.0.1:$MGM_PORT "$@"
}

avg() { python3 -c 'import sys; v=[float(x) for x in sys.argv[1:]]; print(f"{sum(v)/len(v):.0f}")' "$@"; }

if [[ " $PARTS " == *" writes "* ]]; then
    for shape in "-a 2 -s 1" "-a 25 -s 1"; do
        tag=$(echo "$shape" | tr -d ' -')
        for r in $(seq "$RUNS"); do
            for kind in logged temp; do
                log "writes $shape $kind: run $r of $RUNS"
                start_cluster 1
                extra=""
                [[ $kind == temp ]] && extra="-temp"
                # shellcheck disable=SC2086
                flex -t 4 -con 4 -p 512 $shape -o 200 $extra >"$OUT/writes-$tag-$kind-$r.txt" 2>&1
                if [[ $kind == logged ]]; then
                    stat -c %s "$DATA/datanode-1/redo.log" >"$OUT/writes-$tag-redo-$r.txt"
                fi
            done
        done
        echo "== flexasynch -t 4 -con 4 -p 512 $shape -o 200, 1 data node (core 0), client core 1: logged vs -temp, average of $RUNS runs (runs in brackets)"
        for op in insert update delete; do
            runs() { for r in $(seq "$RUNS"); do grep -h "^$op average" "$OUT/writes-$tag-$1-$r.txt" | awk '{sub("/s", "", $3); print $3}'; done; }
            lg=$(runs logged | xargs)
            tp=$(runs temp | xargs)
            printf '%-7s logged %s/s [%s]  temp %s/s [%s]  logged/temp %s %%\n' "$op" \
                "$(avg $lg)" "$lg" "$(avg $tp)" "$tp" \
                "$(python3 -c "print(round(100*$(avg $lg)/$(avg $tp)))")"
        done
        ops=$((4 * 512 * 200 * 3))
        bytes=$(cat "$OUT"/writes-"$tag"-redo-*.txt | xargs)
        echo "redo log after a run (insert, update, delete of $((ops / 3)) rows): $bytes bytes = $(python3 -c "print(round($(avg $bytes)/$ops))") bytes per row change"
    done
fi

if [[ " $PARTS " == *" latency "* ]]; then
    start_cluster 1
    for kind in plain durable; do
        log "latency: $kind"
        extra=""
        [[ $kind == durable ]] && extra="-durable"
        # shellcheck disable=SC2086
        flex -t 1 -con 1 -p 1 -o "$LAT_ROUNDS" -a 2 --latency $extra >"$OUT/latency-$kind.txt" 2>&1
    done
    echo "== serial single-row transactions (flexasynch -t 1 -p 1 -o $LAT_ROUNDS -a 2 --latency), 1 data node, epoch_interval_ms 100"
    for kind in plain durable; do
        echo "-- $kind commits"
        grep -h "latency p50" "$OUT/latency-$kind.txt" | grep -E "^(insert|update|delete)"
    done
fi

if [[ " $PARTS " == *" restart "* ]]; then
    log "restart: inserting $ROWS rows"
    start_cluster 1
    rounds=$(( (ROWS + 4 * 512 - 1) / (4 * 512) ))
    flex -t 4 -con 4 -p 512 -a 2 -o "$rounds" --keep >"$OUT/restart-insert.txt" 2>&1
    log "restart: stopping the data node (SIGTERM) and starting it again"
    kill -TERM "$DN"
    wait "$DN" 2>/dev/null || true
    size=$(stat -c %s "$DATA/datanode-1/redo.log")
    started=$(date +%s.%N)
    taskset -c 0 "$BIN" datanode --connect 127.0.0.1:$MGM_PORT --node-id 1 >"$OUT/restart-datanode.log" 2>&1 &
    DN=$!
    PIDS+=($DN)
    "$BIN" mgm --connect 127.0.0.1:$MGM_PORT wait --timeout-secs 600 >&2
    ended=$(date +%s.%N)
    echo "== restart of 1 data node with $((rounds * 4 * 512)) rows (-a 2), redo log $size bytes (warm page cache)"
    grep -h "restored .* row changes" "$OUT/restart-datanode.log" | sed 's/^data node 1: //'
    python3 -c "print(f'process start to started: {$ended - $started:.2f} s')"
fi
