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
# sysbench.
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

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test"
# The integration tests run the `shoal` binary that cargo builds for them.
cargo test --workspace --locked
