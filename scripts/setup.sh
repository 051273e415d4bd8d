#!/usr/bin/env bash
# Installs what this repository needs on a fresh Debian/Ubuntu machine with Node 20, and nothing
# that is already there: pnpm 12.4.2 (npm), a C++ toolchain for better-sqlite3 (apt, only when
# absent), redis-server and chromium for the tests (apt, only when absent and asked for with
# --for-tests), then the workspace's frozen install.
set -euo pipefail
cd "$(dirname "$0")/.."

for_tests=false
[ "${1:-}" = "--for-tests" ] && for_tests=true

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v make >/dev/null 2>&1 || missing+=(make)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if $for_tests; then
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing with apt: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "12.4.2" ]; then
  echo "setup: installing pnpm 12.4.2 with npm"
  as_root npm install -g --loglevel=error pnpm@12.4.2
fi

# Native addons (better-sqlite3) build against the installed Node's own headers, not a download.
if [ -z "${npm_config_nodedir:-}" ] && [ -f /usr/include/node/node.h ]; then export npm_config_nodedir=/usr; fi
export TURBO_TELEMETRY_DISABLED=1
pnpm install --frozen-lockfile --reporter=append-only 2>&1 | tail -n 5
