#!/usr/bin/env bash
# Runs every benchmark of issue 6 in one go, so the figures in
# docs/performance.md come from one run on one machine state.
#
#   scripts/bench.sh            # all benches, report in target/bench-report.txt
#   scripts/bench.sh overhead   # only the named bench(es)
#
# Benches print ratios against baselines measured in the same run; nothing
# here asserts on time.
set -uo pipefail
cd "$(dirname "$0")/.."

benches=("$@")
if [ ${#benches[@]} -eq 0 ]; then
  benches=(translate overhead waiting ledger_scale ledger layer)
fi

report="${CARGO_TARGET_DIR:-target}/bench-report.txt"
mkdir -p "$(dirname "$report")"
{
  echo "# mcp-tasks-shim benchmarks"
  echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  echo "cpus:    $(nproc) × $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "memory:  $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "rustc:   $(rustc --version)"
  echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min, at start)"
} | tee "$report"

# The overhead bench compares the shim with the peer gateway mcp-proxy 0.6
# (a release build of several minutes, done once; kept in .tools/, which
# git ignores). Only here: CI and scripts/test.sh never need it. Without it
# the bench skips that comparison and says so.
mcp_proxy=.tools/mcp-proxy/bin/mcp-proxy
if [[ " ${benches[*]} " == *" overhead "* ]] && [ ! -x "$mcp_proxy" ]; then
  echo "installing mcp-proxy 0.6.0 into .tools/mcp-proxy (once)"
  # Its 2026-07-28 front; none of the default middleware (otel, oauth, …).
  cargo install mcp-proxy --version 0.6.0 --locked --no-default-features \
    --features protocol-2026-07-28 --root .tools/mcp-proxy 2>&1 | tail -n 2 ||
    echo "mcp-proxy did not install; the overhead bench will skip it"
fi

# Build everything first so compilation does not overlap the measurements.
cargo bench --features rmcp --no-run $(printf -- '--bench %s ' "${benches[@]}") 2>&1 | tail -n 2

# A bench that fails is reported and the others still run.
failed=()
for b in "${benches[@]}"; do
  echo | tee -a "$report"
  echo "## cargo bench --bench $b" | tee -a "$report"
  cargo bench --features rmcp --bench "$b" 2>&1 | tee -a "$report" || failed+=("$b")
done
echo
echo "report: $report"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
