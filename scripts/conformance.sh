#!/usr/bin/env bash
# Runs the `tasks-*` server scenarios of the official MCP conformance suite
# (@modelcontextprotocol/conformance, pinned) and prints a per-scenario table.
#
# Usage: scripts/conformance.sh URL | baseline | shim | rmcp-layer | self-test
#   URL       an already running 2026-07-28 endpoint, e.g. http://127.0.0.1:8080/mcp
#   baseline  starts `mcp-tasks-shim reference-server --revision 2026-07-28 --http …`
#             (the modern reference server alone) and runs the suite against it
#   shim      starts `mcp-tasks-shim http --listen … -- mcp-tasks-shim reference-server
#             --revision 2025-11-25` (a legacy server behind the shim) and runs the suite
#   rmcp-layer starts `examples/rmcp_layer --listen …` (the rmcp reference server on
#             axum, feature `rmcp`) and runs the suite against it: 2026-07-28 requests
#             pass through to rmcp
#   self-test shows the verdict rejecting doctored results (too few passes, an
#             undeclared skip, a failure, missing results); needs only node
#
# Environment:
#   SHIM_BIN          the mcp-tasks-shim binary (default: target/release, then target/debug;
#                     built with `cargo build` when neither exists)
#   RMCP_LAYER_BIN    the rmcp_layer example (default: target/debug/examples/rmcp_layer,
#                     built with `cargo build --features rmcp --example rmcp_layer` if missing)
#   PORT              port for the started server (default: a free one)
#   SCENARIO_TIMEOUT  seconds per scenario (default 120)
#   RESULTS_DIR       where the suite writes checks.json (default .tools/results/<mode>-<time>)
#
# Node >= 22 and the suite are installed on first use into .tools/ (git-ignored),
# at pinned versions; later runs reuse them. Exit status: 0 when no check
# failed, at least EXPECTED_PASSED checks passed and only ALLOWED_SKIPS were
# skipped (scripts/conformance-summary.js decides); 1 otherwise.
set -euo pipefail

NODE_VERSION=22.23.3
SUITE_VERSION=0.2.0-alpha.12
EXPECTED_SCENARIOS=10
# What SUITE_VERSION's tasks-* scenarios give a conforming server, as
# `scripts/conformance.sh baseline` and `shim` both report it: 44 checks
# passed over the 10 scenarios, and one check skipped by the suite itself,
# tasks-status-notifications (its checks.json says "pending
# subscriptions/listen rewrite"). A run with fewer passes or another skip
# has not shown conformance, even when nothing failed. Revisit both
# whenever SUITE_VERSION changes.
EXPECTED_PASSED=44
ALLOWED_SKIPS=(tasks-status-notifications)

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="$ROOT/.tools"
NODE_DIR="$TOOLS/node22"
SUITE_DIR="$TOOLS/conformance"
NODE_BIN="$NODE_DIR/node_modules/node/bin"
SUITE_PKG="$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/package.json"
SCENARIO_TIMEOUT=${SCENARIO_TIMEOUT:-120}

die() { echo "conformance.sh: $*" >&2; exit 2; }
log() { echo "==> $*" >&2; }

[ $# -eq 1 ] || die "usage: $0 URL|baseline|shim|rmcp-layer|self-test"
MODE=$1
case "$MODE" in
  http://*|https://*|baseline|shim|rmcp-layer|self-test) ;;
  *) die "unknown mode '$MODE' (expected a URL, baseline, shim, rmcp-layer or self-test)" ;;
esac

SUMMARY=("$ROOT/scripts/conformance-summary.js" --expected-passed "$EXPECTED_PASSED")
for skip in "${ALLOWED_SKIPS[@]}"; do SUMMARY+=(--allow-skip "$skip"); done

if [ "$MODE" = self-test ]; then
  command -v node >/dev/null || die "node is required for the self-test"
  exec node "${SUMMARY[@]}" --self-test
fi

# --- installation (idempotent, pinned) --------------------------------------

# Installs `$2@$3` into folder $1 unless that exact version is already there.
# Uses the lock file when one exists (npm ci), so reinstalls are reproducible.
npm_pinned() {
  local dir=$1 pkg=$2 version=$3 installed=$4
  if [ -f "$installed" ] && grep -q "\"version\": *\"$version\"" "$installed"; then
    return 0
  fi
  log "installing $pkg@$version into ${dir#"$ROOT"/}"
  mkdir -p "$dir"
  cat > "$dir/package.json" <<EOF
{ "private": true, "dependencies": { "$pkg": "$version" } }
EOF
  if [ -f "$dir/package-lock.json" ] && grep -q "\"$pkg\": *\"$version\"" "$dir/package-lock.json"; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2
  else
    rm -f "$dir/package-lock.json"
    (cd "$dir" && npm install --save-exact --no-audit --no-fund --loglevel=error) >&2
  fi
  [ -f "$installed" ] || die "installing $pkg@$version into $dir failed"
}

command -v npm >/dev/null || die "npm is required to install Node $NODE_VERSION and the suite"
npm_pinned "$NODE_DIR" node "$NODE_VERSION" "$NODE_DIR/node_modules/node/package.json"
[ -x "$NODE_BIN/node" ] || die "no node binary at $NODE_BIN/node"
export PATH="$NODE_BIN:$PATH"
npm_pinned "$SUITE_DIR" @modelcontextprotocol/conformance "$SUITE_VERSION" "$SUITE_PKG"
CONFORMANCE=("$NODE_BIN/node" "$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js")
log "node $("$NODE_BIN/node" --version), conformance $SUITE_VERSION"

# --- the server under test ---------------------------------------------------

SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    # the shim's child (the upstream reference server) ends with it; wait briefly
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.2
    done
    kill -9 "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

find_bin() {
  if [ -n "${SHIM_BIN:-}" ]; then
    [ -x "$SHIM_BIN" ] || die "SHIM_BIN=$SHIM_BIN is not executable"
    echo "$SHIM_BIN"; return
  fi
  local target=${CARGO_TARGET_DIR:-$ROOT/target}
  for b in "$target/release/mcp-tasks-shim" "$target/debug/mcp-tasks-shim"; do
    [ -x "$b" ] && { echo "$b"; return; }
  done
  log "no mcp-tasks-shim binary found; running cargo build"
  (cd "$ROOT" && cargo build --quiet) >&2 || die "cargo build failed"
  echo "$target/debug/mcp-tasks-shim"
}

find_rmcp_layer() {
  if [ -n "${RMCP_LAYER_BIN:-}" ]; then
    [ -x "$RMCP_LAYER_BIN" ] || die "RMCP_LAYER_BIN=$RMCP_LAYER_BIN is not executable"
    echo "$RMCP_LAYER_BIN"; return
  fi
  local bin=${CARGO_TARGET_DIR:-$ROOT/target}/debug/examples/rmcp_layer
  if [ ! -x "$bin" ]; then
    log "no rmcp_layer example found; running cargo build --features rmcp --example rmcp_layer"
    (cd "$ROOT" && cargo build --quiet --features rmcp --example rmcp_layer) >&2 || die "cargo build failed"
  fi
  echo "$bin"
}

free_port() {
  node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

# Starts "$@" in the background, logging to $RESULTS/server.log, and waits
# until 127.0.0.1:$PORT accepts connections.
start_server() {
  log "starting: $*"
  "$@" >"$RESULTS/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 150); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then return 0; fi
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$RESULTS/server.log" >&2; die "the server exited early"; }
    sleep 0.2
  done
  die "the server did not listen on port $PORT within 30 s"
}

RESULTS=${RESULTS_DIR:-$TOOLS/results/$(echo "$MODE" | tr -c 'a-zA-Z0-9\n' '_')-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RESULTS"

case "$MODE" in
  http://*|https://*) URL=$MODE ;;
  baseline|shim)
    BIN=$(find_bin)
    PORT=${PORT:-$(free_port)}
    URL="http://127.0.0.1:$PORT/mcp"
    if [ "$MODE" = baseline ]; then
      "$BIN" reference-server --help 2>/dev/null | grep -q -- '--http' ||
        die "$BIN has no \`reference-server --http\` (stale build? rebuild or set SHIM_BIN)"
      start_server "$BIN" reference-server --revision 2026-07-28 --http "127.0.0.1:$PORT"
    else
      "$BIN" http --help >/dev/null 2>&1 || die "$BIN has no \`http\` subcommand yet"
      start_server "$BIN" http --listen "127.0.0.1:$PORT" -- "$BIN" reference-server --revision 2025-11-25
    fi
    ;;
  rmcp-layer)
    BIN=$(find_rmcp_layer)
    PORT=${PORT:-$(free_port)}
    URL="http://127.0.0.1:$PORT/mcp"
    start_server "$BIN" --listen "127.0.0.1:$PORT"
    ;;
  *) die "unknown mode '$MODE' (expected a URL, baseline, shim or rmcp-layer)" ;;
esac
log "target: $URL ($MODE); results in ${RESULTS#"$ROOT"/}"

# --- the scenarios -------------------------------------------------------------

mapfile -t SCENARIOS < <("${CONFORMANCE[@]}" list --server | sed -n 's/^ *- \(tasks-[a-z0-9-]*\).*/\1/p')
[ "${#SCENARIOS[@]}" -gt 0 ] || die "the suite lists no tasks-* server scenarios"
[ "${#SCENARIOS[@]}" -eq "$EXPECTED_SCENARIOS" ] ||
  log "warning: expected $EXPECTED_SCENARIOS tasks-* scenarios, the suite lists ${#SCENARIOS[@]}"

for s in "${SCENARIOS[@]}"; do
  log "scenario $s"
  # No --spec-version: with it every tasks-* scenario reports skipped.
  if ! timeout --kill-after=5 "$SCENARIO_TIMEOUT" "${CONFORMANCE[@]}" server \
      --url "$URL" --scenario "$s" -o "$RESULTS/$s" >"$RESULTS/$s.log" 2>&1; then
    echo "    (suite exited non-zero; see ${RESULTS#"$ROOT"/}/$s.log)" >&2
  fi
done

# --- the table -----------------------------------------------------------------

node "${SUMMARY[@]}" "$RESULTS" "${SCENARIOS[@]}"
