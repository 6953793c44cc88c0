# Shared by the benchmark scripts (sourced, not run).

# build_before REV: builds shoal at git revision REV (release) in a
# worktree under target/, and prints the path of its binary.
build_before() {
    local rev=$1 wt=target/bench-before
    if [[ ! -d "$wt" ]]; then
        git worktree add -f "$wt" "$rev" >&2
    else
        git -C "$wt" checkout -q "$rev"
    fi
    printf '[bench] building %s (release) in %s\n' "$rev" "$wt" >&2
    (cd "$wt" && CARGO_TARGET_DIR="$PWD/target" cargo build --release -p shoal >&2)
    echo "$PWD/$wt/target/release/shoal"
}
