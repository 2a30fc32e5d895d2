#!/usr/bin/env bash
# The whole test suite: installs the pinned npm test peers (tests/peers),
# and redis-server and python3 (Debian packages) when missing,
# runs cargo test (with the `rmcp` feature, so the rmcp examples and
# tests/rmcp_examples.rs build and run), then the official MCP conformance
# suite's tasks-* scenarios against the modern reference server (baseline),
# against a 2025-11-25 server behind the shim, and against the rmcp example
# behind the tower layer (scripts/conformance.sh installs Node 22 and the
# suite under .tools/ on first use).
# Arguments are passed to `cargo test`, e.g. scripts/test.sh --test reference_legacy_ts
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -f tests/peers/package-lock.json ]]; then
  npm ci --prefix tests/peers --no-audit --no-fund
else
  npm install --prefix tests/peers --no-audit --no-fund
fi
# The fuzz properties draw from a pinned seed here, so CI and a local run
# of this script explore the same cases and a green run stays green.
# Exploring new cases is docs/fuzzing.md's "Running longer" (random seeds).
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-2026112901}"
# Installs Debian package $2 with apt unless command $1 exists; $3 says
# which tests need it.
apt_provide() {
  local cmd=$1 pkg=$2 why=$3 sudo=""
  command -v "$cmd" >/dev/null 2>&1 && return 0
  echo "scripts/test.sh: installing $pkg for $why"
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -q "$pkg" ||
    { $sudo apt-get update -q && $sudo apt-get install -y -q "$pkg"; }
  command -v "$cmd" >/dev/null 2>&1 || { echo "scripts/test.sh: still no $cmd after installing $pkg" >&2; exit 1; }
}
# The shared-ledger tests start a real redis-server.
apt_provide redis-server redis-server "the shared-ledger tests"
# The misbehaving peers of the fault tests (tests/peers/*.py, standard
# library only) run under python3.
apt_provide python3 python3 "the fault-injecting test peers"
cargo test --features rmcp "$@"
# The library's docs are part of its interface: a broken intra-doc link or
# a warning fails the run, as a failing doctest does.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --lib --features rmcp
# The `otel` cargo feature (off by default) must keep compiling: checked,
# not tested (about a minute of CPU, once its crates are fetched).
cargo check --features otel
# The binary cargo test just built (not a stale release build); the
# `rmcp` feature leaves it as it is, and makes this a no-op.
cargo build --features rmcp --bin mcp-tasks-shim
export SHIM_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/mcp-tasks-shim"
bash scripts/conformance.sh baseline
bash scripts/conformance.sh shim
# 2026-07-28 through TasksCompatLayer to rmcp's StreamableHttpService
# (examples/rmcp_layer, built by the cargo test run above).
bash scripts/conformance.sh rmcp-layer
