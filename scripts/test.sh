#!/usr/bin/env bash
# Installs the pinned npm test peers (tests/peers), then runs cargo test.
# Arguments are passed to `cargo test`, e.g. scripts/test.sh --test reference_legacy_ts
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -f tests/peers/package-lock.json ]]; then
  npm ci --prefix tests/peers --no-audit --no-fund
else
  npm install --prefix tests/peers --no-audit --no-fund
fi
cargo test "$@"
