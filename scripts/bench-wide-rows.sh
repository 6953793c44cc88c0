#!/usr/bin/env bash
# Wide rows, measured (see docs/BENCHMARKS.md, "Wide rows"):
#
#   BEFORE=4914333 ./scripts/bench-wide-rows.sh   # this build against BEFORE
#   RUNS=3 SHAPES="-a 25 -s 1" ...                # runs per build, row shapes
#   BEFORE_BIN=path/to/shoal ...                   # compare with that binary
#
# One data node pinned to core 0, flexasynch pinned to core 1
# (`-t 4 -con 4 -p 512 -dirty -temp`, each shape of SHAPES), alternating
# this build and BEFORE (built in a worktree under target/), RUNS runs
# each. flexasynch prints, per phase, how busy each core was and its own
# CPU per operation. Raw outputs go to target/bench-wide-rows/; the
# summary (averages, runs in brackets) to stdout.
set -euo pipefail
# A binary named relative to where the script was started.
if [[ -n "${BEFORE_BIN:-}" ]]; then
    BEFORE_BIN=$(realpath -e "$BEFORE_BIN")
fi
cd "$(dirname "$0")/.."

OUT=target/bench-wide-rows
mkdir -p "$OUT"
MGM_PORT=${MGM_PORT:-21386}
RUNS=${RUNS:-3}
SHAPES=${SHAPES:-"-a 25 -s 1|-a 2 -s 1|-a 100 -s 1|-a 2 -s 256"}
log() { printf '[bench-wide-rows] %s\n' "$*" >&2; }

log "building shoal (release)"
cargo build --release -p shoal >&2
NEW=$PWD/target/release/shoal
# shellcheck source=scripts/bench-common.sh
source scripts/bench-common.sh
OLD=
if [[ -n "${BEFORE_BIN:-}" ]]; then
    OLD=$BEFORE_BIN
elif [[ -n "${BEFORE:-}" ]]; then
    OLD=$(build_before "$BEFORE")
fi

PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do
        [[ -n "$p" ]] && kill "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    PIDS=()
}
trap cleanup EXIT
DATA=$(mktemp -d)

# run BINARY SHAPE OUTFILE: a fresh one-node cluster, one flexasynch run.
run() {
    local bin=$1 shape=$2 file=$3
    cleanup
    rm -rf "${DATA:?}"/*
    {
        printf '[system]\ndata_dir = "%s"\n\n' "$DATA"
        printf '[datanode_defaults]\nno_of_replicas = 1\ndata_memory = "4G"\n\n'
        printf '[[node]]\nnode_id = 49\ntype = "mgmd"\nhost = "127.0.0.1"\nport = %s\n' "$MGM_PORT"
        printf '\n[[node]]\nnode_id = 1\ntype = "datanode"\nhost = "127.0.0.1"\n'
    } >"$DATA/config.toml"
    taskset -c 1 "$bin" mgmd --config "$DATA/config.toml" >>"$OUT/mgmd.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do "$bin" mgm --connect 127.0.0.1:$MGM_PORT -e show >/dev/null 2>&1 && break; sleep 0.1; done
    taskset -c 0 "$bin" datanode --connect 127.0.0.1:$MGM_PORT --node-id 1 >>"$OUT/datanode.log" 2>&1 &
    PIDS+=($!)
    "$bin" mgm --connect 127.0.0.1:$MGM_PORT wait --timeout-secs 60 >&2
    # shellcheck disable=SC2086
    taskset -c 1 "$bin" bench flexasynch --connect 127.0.0.1:$MGM_PORT \
        -t 4 -con 4 -p 512 $shape -dirty -temp >"$file" 2>&1
}

IFS='|' read -r -a shape_list <<<"$SHAPES"
for shape in "${shape_list[@]}"; do
    tag=$(echo "$shape" | tr -d ' -')
    for r in $(seq "$RUNS"); do
        log "$shape: run $r of $RUNS"
        run "$NEW" "$shape" "$OUT/new-$tag-$r.txt"
        [[ -n "$OLD" ]] && run "$OLD" "$shape" "$OUT/old-$tag-$r.txt"
    done
    echo "== flexasynch -t 4 -con 4 -p 512 $shape -dirty -temp, 1 data node (core 0), client on core 1: averages of $RUNS runs (runs in brackets)"
    for op in insert update delete read; do
        runs() { for r in $(seq "$RUNS"); do grep -h "^$op average" "$OUT/$1-$tag-$r.txt" | awk '{sub("/s", "", $3); print $3}'; done; }
        if [[ -n "$OLD" ]]; then
            python3 -c 'import sys
new = [int(x) for x in sys.argv[2].split()]
old = [int(x) for x in sys.argv[3].split()]
n, o = sum(new) / len(new), sum(old) / len(old)
print("%-6s new %9.0f %s  old %9.0f %s  %+.1f %%" % (sys.argv[1], n, new, o, old, 100 * (n / o - 1)))' "$op" "$(runs new)" "$(runs old)"
        else
            echo "$op $(runs new | tr '\n' ' ')"
        fi
    done
    for build in new old; do
        [[ $build == old && -z "$OLD" ]] && continue
        echo "-- CPU of the last run of the $build build, per phase:"
        grep -h "ops in" "$OUT/$build-$tag-$RUNS.txt" | sed 's/^ */   /'
    done
done
