#!/usr/bin/env bash
# Durability, measured (see docs/BENCHMARKS.md, "Durability"):
#
#   ./scripts/bench-durability.sh                 # every part
#   PARTS="writes latency restart" RUNS=3 ROWS=1000000 ./scripts/bench-durability.sh
#   PARTS=restart ROWS=2000000 SHAPE="-a 25 -s 10" COLD=1 ./scripts/bench-durability.sh
#   REDO_LOG_SIZE=256M PARTS=restart ./scripts/bench-durability.sh   # checkpoints every 32 MB of log
#   (CHECKPOINT_RATE=0: checkpoints unthrottled, for loads that outrun 64M)
#   RECOVERY_WORK=25 ...       # checkpoint_recovery_work_pct (default 50):
#                              # partial checkpoints up to 25 % of a full one
#   PERF=1 PARTS=restart ...   # the restarted data node under perf record
#   RESTARTS=3 PARTS=restart ... # kill and restart the loaded node 3 times
#   RESTART_BINS="a/shoal b/shoal" RESTARTS=4 PARTS=restart ...
#                                # restarts alternate between these binaries
#                                # (same files: an A/B of the restore path)
#   SHOAL_BIN=path/to/shoal ...  # measure that binary (no build)
#
# One data node pinned to core 0, the client (and mgmd) on core 1, redo
# log and sysfile in a temporary data dir on this machine's disk.
# - writes: flexasynch -t 4 -con 4 -p 512 (-a 2 and -a 25), a logged table
#   against a -temp (not logged) one, alternating, RUNS runs each; the
#   data dir's size after each logged run (redo log + checkpoints, bytes
#   per row change), the local checkpoints written during it (MB, MB/s)
#   and the durable lag the president reported.
# - latency: serial single-row transactions (-t 1 -p 1 -o LAT_ROUNDS -a 2),
#   with and without durable commits: p50/p99 per phase.
# - lag: a longer flexasynch run (-o LAG_ROUNDS -a 2) at full write
#   load; the durable lag the president reports every 50 epochs.
# - restart: ROWS rows inserted (SHAPE, default -a 2; kept), the data node
#   killed (kill -9) and started again (not pinned: nothing else runs):
#   the time its restore took, from its checkpoints and the rest of its
#   log. COLD=1 drops the page cache first (root only).
# Raw outputs go to target/bench-durability/; a summary to stdout.
set -euo pipefail
# A binary named relative to where the script was started.
if [[ -n "${SHOAL_BIN:-}" ]]; then
    SHOAL_BIN=$(realpath -e "$SHOAL_BIN")
fi
restart_bins=()
if [[ -n "${RESTART_BINS:-}" ]]; then
    read -r -a named <<<"$RESTART_BINS"
    for b in "${named[@]}"; do
        restart_bins+=("$(realpath -e "$b")")
    done
    if [[ ${#restart_bins[@]} == 0 ]]; then
        echo "RESTART_BINS names no binary" >&2
        exit 2
    fi
fi
cd "$(dirname "$0")/.."

OUT=target/bench-durability
mkdir -p "$OUT"
MGM_PORT=${MGM_PORT:-21486}
RUNS=${RUNS:-3}
ROWS=${ROWS:-1000000}
LAT_ROUNDS=${LAT_ROUNDS:-300}
LAG_ROUNDS=${LAG_ROUNDS:-3000}
PARTS=${PARTS:-"writes latency lag restart"}
SHAPE=${SHAPE:-"-a 2"}
REDO_LOG_SIZE=${REDO_LOG_SIZE:-1G}
CHECKPOINT_RATE=${CHECKPOINT_RATE:-64M}
RECOVERY_WORK=${RECOVERY_WORK:-50}
COLD=${COLD:-0}
RESTARTS=${RESTARTS:-1}
if ! [[ $RESTARTS =~ ^[1-9][0-9]*$ ]]; then
    echo "RESTARTS must be a whole number of restarts, at least 1 (got '$RESTARTS')" >&2
    exit 2
fi
if [[ ${PERF:-0} == 1 && $RESTARTS != 1 ]]; then
    # perf's pid stands in for the node's: only one restart can be killed.
    echo "PERF=1 profiles one restart: leave RESTARTS unset or 1" >&2
    exit 2
fi
log() { printf '[bench-durability] %s\n' "$*" >&2; }

if [[ -n "${SHOAL_BIN:-}" ]]; then
    BIN=$SHOAL_BIN
else
    log "building shoal (release)"
    cargo build --release -p shoal >&2
    BIN=$PWD/target/release/shoal
fi

PIDS=()
DN=
DNLOG=$OUT/datanode.log
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
        printf '[datanode_defaults]\nno_of_replicas = 1\ndata_memory = "8G"\nredo_log_size = "%s"\ncheckpoint_bytes_per_sec = "%s"\ncheckpoint_recovery_work_pct = %s\n\n' \
            "$REDO_LOG_SIZE" "$CHECKPOINT_RATE" "$RECOVERY_WORK"
        printf '[[node]]\nnode_id = 49\ntype = "mgmd"\nhost = "127.0.0.1"\nport = %s\n' "$MGM_PORT"
        printf '\n[[node]]\nnode_id = 1\ntype = "datanode"\nhost = "127.0.0.1"\n'
    } >"$DATA/config.toml"
    taskset -c 1 "$BIN" mgmd --config "$DATA/config.toml" >>"$OUT/mgmd.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do "$BIN" mgm --connect 127.0.0.1:$MGM_PORT -e show >/dev/null 2>&1 && break; sleep 0.1; done
    taskset -c 0 "$BIN" datanode --connect 127.0.0.1:$MGM_PORT --node-id 1 >"$DNLOG" 2>&1 &
    DN=$!
    PIDS+=($DN)
    "$BIN" mgm --connect 127.0.0.1:$MGM_PORT wait --timeout-secs 600 >&2
}

flex() {
    # shellcheck disable=SC2086
    taskset -c 1 "$BIN" bench flexasynch --connect 127.0.0.1:$MGM_PORT "$@"
}

# Bytes of a data node's files: redo log and checkpoints.
disk_bytes() {
    find "$DATA/datanode-1" \( -name 'redo-*.log' -o -name 'lcp-*.ckpt' \) -printf '%s\n' |
        awk '{ s += $1 } END { print s + 0 }'
}

avg() { python3 -c 'import sys; v=[float(x) for x in sys.argv[1:]]; print(f"{sum(v)/len(v):.0f}")' "$@"; }

if [[ " $PARTS " == *" writes "* ]]; then
    for shape in "-a 2 -s 1" "-a 25 -s 1"; do
        tag=$(echo "$shape" | tr -d ' -')
        for r in $(seq "$RUNS"); do
            for kind in logged temp; do
                log "writes $shape $kind: run $r of $RUNS"
                DNLOG=$OUT/writes-$tag-$kind-$r.datanode.log
                start_cluster 1
                extra=""
                [[ $kind == temp ]] && extra="-temp"
                # shellcheck disable=SC2086
                flex -t 4 -con 4 -p 512 $shape -o 200 $extra >"$OUT/writes-$tag-$kind-$r.txt" 2>&1
                if [[ $kind == logged ]]; then
                    disk_bytes >"$OUT/writes-$tag-redo-$r.txt"
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
        echo "data dir after a run (insert, update, delete of $((ops / 3)) rows; redo log + checkpoints): $bytes bytes = $(python3 -c "print(round($(avg $bytes)/$ops))") bytes per row change"
        python3 - "$OUT"/writes-"$tag"-logged-*.datanode.log <<'EOF'
import re, sys
n = mb = ms = 0
lags = []
for path in sys.argv[1:]:
    for line in open(path):
        m = re.search(r"local checkpoint \d+ \((full|partial)\): \d+ rows and \d+ deletes, ([\d.]+) MB in (\d+) ms", line)
        if m:
            n += 1; mb += float(m.group(2)); ms += int(m.group(3))
        m = re.search(r"durable lag: .* became durable ([\d.]+) ms \(average\) and at most (\d+) ms", line)
        if m:
            lags.append((float(m.group(1)), int(m.group(2))))
runs = len(sys.argv) - 1
if n:
    print(f"local checkpoints: {n} in {runs} runs, {mb:.1f} MB written in {ms} ms of scans ({mb / max(ms, 1) * 1000:.1f} MB/s while one ran)")
else:
    print("local checkpoints: none recorded")
if lags:
    print(f"durable lag after an epoch ends: average {sum(a for a, _ in lags) / len(lags):.1f} ms, at most {max(m for _, m in lags)} ms ({len(lags)} reports of 50 epochs)")
EOF
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

if [[ " $PARTS " == *" lag "* ]]; then
    log "lag: flexasynch -o $LAG_ROUNDS -a 2 at full load"
    DNLOG=$OUT/lag.datanode.log
    start_cluster 1
    flex -t 4 -con 4 -p 512 -a 2 -o "$LAG_ROUNDS" >"$OUT/lag.txt" 2>&1
    echo "== durable lag at full write load (flexasynch -t 4 -con 4 -p 512 -a 2 -o $LAG_ROUNDS), epoch_interval_ms 100"
    grep -h "average:" "$OUT/lag.txt" | grep -E "^(insert|update|delete)" || true
    grep -h "durable lag" "$DNLOG" | sed 's/^data node 1: //'
fi

if [[ " $PARTS " == *" restart "* ]]; then
    log "restart: inserting $ROWS rows ($SHAPE)"
    DNLOG=$OUT/restart-insert.datanode.log
    start_cluster 1
    rounds=$(( (ROWS + 4 * 512 - 1) / (4 * 512) ))
    # The inserts must complete; a later phase refused with 410 (a disk
    # slower than 1 KB-row updates: backpressure) still leaves the rows.
    # shellcheck disable=SC2086
    flex -t 4 -con 4 -p 512 $SHAPE -o "$rounds" --keep >"$OUT/restart-insert.txt" 2>&1 || true
    grep -q "^  insert: " "$OUT/restart-insert.txt" || { cat "$OUT/restart-insert.txt" >&2; exit 1; }
    # Until a checkpoint covers most rows: the restart reads it and a
    # short log (as a node does some time after a load).
    sleep "${SETTLE_SECS:-10}"
    if [[ ${#restart_bins[@]} == 0 ]]; then
        restart_bins=("$BIN")
    fi
    for restart in $(seq "$RESTARTS"); do
        RBIN=${restart_bins[$(( (restart - 1) % ${#restart_bins[@]} ))]}
        log "restart $restart: killing the data node (kill -9) and starting it again"
        kill -KILL "$DN"
        wait "$DN" 2>/dev/null || true
        size=$(disk_bytes)
        if [[ $COLD == 1 ]]; then
            sync
            echo 3 >/proc/sys/vm/drop_caches
        fi
        started=$(date +%s.%N)
        if [[ ${PERF:-0} == 1 ]]; then
            # Where a restart spends its time: `perf report -i $OUT/restart.perf.data`.
            perf record -g -o "$OUT/restart.perf.data" -- "$RBIN" datanode --connect 127.0.0.1:$MGM_PORT --node-id 1 >"$OUT/restart-datanode.log" 2>&1 &
        else
            # Nothing else runs during a restart: the node may use both cores
            # (its checkpoint reader thread beside the thread applying).
            "$RBIN" datanode --connect 127.0.0.1:$MGM_PORT --node-id 1 >"$OUT/restart-datanode.log" 2>&1 &
        fi
        DN=$!
        PIDS+=($DN)
        "$BIN" mgm --connect 127.0.0.1:$MGM_PORT wait --timeout-secs 600 >&2
        ended=$(date +%s.%N)
        peak=$(awk '/VmHWM/ { print $2 * 1024 }' "/proc/$DN/status")
        rss=$(awk '/VmRSS/ { print $2 * 1024 }' "/proc/$DN/status")
        cache=warm
        [[ $COLD == 1 ]] && cache="cold (page cache dropped)"
        echo "== restart (kill -9) of 1 data node with $((rounds * 4 * 512)) rows ($SHAPE), $size bytes of redo log and checkpoints, $cache"
        [[ -n "${RESTART_BINS:-}" ]] && echo "binary: $RBIN"
        grep -h "restoring from\|restored .* row changes" "$OUT/restart-datanode.log" | sed 's/^data node 1: //'
        python3 -c "
rows = $((rounds * 4 * 512)); secs = $ended - $started; size = $size
print(f'process start to started: {secs:.2f} s = {rows / secs / 1e6:.2f} M rows/s, {size / secs / 1e6:.0f} MB/s of files; data node memory: peak {$peak / 1e9:.2f} GB, {$rss / 1e9:.2f} GB once started')"
    done
fi
